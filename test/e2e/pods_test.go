//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigyaml "sigs.k8s.io/yaml"
)

// rendered is deploy/'s manifests as the e2e overlay renders them
// (kubectl kustomize): the workloads, whose containers the harness runs as
// processes (there are no container images here), and everything else,
// applied as is.
type rendered struct {
	controller *appsv1.Deployment
	node       *appsv1.DaemonSet
	configMaps map[string]*corev1.ConfigMap
	applied    []byte // every other document, as one YAML stream
}

func render(kubectl, dir string) (*rendered, error) {
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w", dir, errText(err))
	}
	r := &rendered{configMaps: map[string]*corev1.ConfigMap{}}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return nil, fmt.Errorf("rendered manifests: %w", err)
		}
		if raw == nil {
			continue
		}
		doc, err := sigyaml.Marshal(raw)
		if err != nil {
			return nil, err
		}
		switch raw["kind"] {
		case "Deployment":
			r.controller = &appsv1.Deployment{}
			err = sigyaml.Unmarshal(doc, r.controller)
		case "DaemonSet":
			r.node = &appsv1.DaemonSet{}
			err = sigyaml.Unmarshal(doc, r.node)
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			err = sigyaml.Unmarshal(doc, cm)
			r.configMaps[cm.Name] = cm
		}
		if err != nil {
			return nil, err
		}
		r.applied = append(r.applied, append([]byte("---\n"), doc...)...)
	}
	if r.controller == nil || r.node == nil {
		return nil, fmt.Errorf("rendered manifests lack the controller Deployment or the node DaemonSet")
	}
	return r, nil
}

// podEnv is what a real pod would give a container: its names, the
// volumes' places on the machine that runs the process, and credentials.
type podEnv struct {
	podName, namespace, nodeName string
	mounts                       map[string]string // volume name -> path on this machine
	kubeconfig                   string
	bins                         map[string]string // image name -> binary
}

// containerCommand turns one container of the rendered pod spec into an
// argv and environment: $(VAR) references expanded as the kubelet does,
// mount paths mapped to the volumes' places here, listen addresses of
// declared ports moved to free loopback ports, and the credentials a pod
// would get from its service account passed as flags.
func containerCommand(c *corev1.Container, r *rendered, pe podEnv) (argv, env []string, err error) {
	bin := pe.bins[imageName(c.Image)]
	if bin == "" {
		return nil, nil, fmt.Errorf("container %s: no binary for image %q", c.Name, c.Image)
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		v, err := envValue(e, r, pe)
		if err != nil {
			return nil, nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[strconv.Itoa(int(p.ContainerPort))] = true
	}
	argv = []string{bin}
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		a = expandVars(a, vars)
		a = mapMounts(a, c.VolumeMounts, pe.mounts)
		if a, err = mapPorts(a, ports); err != nil {
			return nil, nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		argv = append(argv, a)
	}
	argv = append(argv, "--kubeconfig="+pe.kubeconfig)
	for _, a := range argv {
		if a == "--leader-elect" || a == "--leader-election" {
			// In a pod, the namespace comes from the service account mount.
			argv = append(argv, "--leader-election-namespace="+pe.namespace)
			break
		}
	}
	return argv, env, nil
}

// imageName is an image reference without registry path and tag:
// "example/sig-storage/csi-attacher:v4.13.0" is "csi-attacher".
func imageName(ref string) string {
	ref = ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.IndexAny(ref, ":@"); i >= 0 {
		ref = ref[:i]
	}
	return ref
}

func envValue(e corev1.EnvVar, r *rendered, pe podEnv) (string, error) {
	switch {
	case e.ValueFrom == nil:
		return e.Value, nil
	case e.ValueFrom.FieldRef != nil:
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.name":
			return pe.podName, nil
		case "metadata.namespace":
			return pe.namespace, nil
		case "spec.nodeName":
			return pe.nodeName, nil
		}
		return "", fmt.Errorf("env %s: field %s not supported by the harness", e.Name, e.ValueFrom.FieldRef.FieldPath)
	case e.ValueFrom.ConfigMapKeyRef != nil:
		ref := e.ValueFrom.ConfigMapKeyRef
		cm := r.configMaps[ref.Name]
		if cm == nil {
			return "", fmt.Errorf("env %s: ConfigMap %s is not in the rendered manifests", e.Name, ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return "", fmt.Errorf("env %s: ConfigMap %s has no key %s", e.Name, ref.Name, ref.Key)
		}
		return v, nil
	}
	return "", fmt.Errorf("env %s: source not supported by the harness", e.Name)
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expandVars(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m // kubelet leaves unknown references as they are
	})
}

// mapMounts rewrites a path under a volume mount (at the start of the
// argument, after '=' or after unix://) to the volume's place here.
func mapMounts(a string, mounts []corev1.VolumeMount, places map[string]string) string {
	for _, m := range mounts {
		place, ok := places[m.Name]
		if !ok || place == m.MountPath {
			continue
		}
		re := regexp.MustCompile(`(^|=|unix://)` + regexp.QuoteMeta(m.MountPath) + `(/|$)`)
		a = re.ReplaceAllString(a, "${1}"+place+"${2}")
	}
	return a
}

var listenArg = regexp.MustCompile(`^(--[a-z-]+=)(?:0\.0\.0\.0)?:([0-9]+)$`)

// mapPorts moves "--flag=:PORT" of a declared container port to a free
// port on 127.0.0.1: processes here share one network namespace.
func mapPorts(a string, ports map[string]bool) (string, error) {
	m := listenArg.FindStringSubmatch(a)
	if m == nil || !ports[m[2]] {
		return a, nil
	}
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s127.0.0.1:%d", m[1], p), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errText adds a command's stderr to its error.
func errText(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}

// writeFile is os.WriteFile with private permissions (kubeconfigs hold
// credentials).
func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
