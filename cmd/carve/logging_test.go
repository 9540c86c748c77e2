package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
)

// TestLoggingFormatRefusedUnknown: every command takes --logging-format
// (an unknown flag would fail the parse instead), and an unknown format
// stops it at once, naming the formats there are.
func TestLoggingFormatRefusedUnknown(t *testing.T) {
	for name, run := range map[string]func([]string) error{
		"controller": runController, "node": runNode, "standalone": runStandalone,
	} {
		err := run([]string{"--logging-format=xml"})
		if err == nil {
			t.Fatalf("carve %s --logging-format=xml: no error", name)
		}
		for _, want := range []string{`"xml"`, "Unsupported log format", `"json"`, `"text"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("carve %s --logging-format=xml: %q does not say %s", name, err, want)
			}
		}
	}
}

// applyForTest parses args as a command's logging flags and applies them,
// writing to a buffer; the test's end restores klog's defaults.
func applyForTest(t *testing.T, args ...string) (*logsapi.LoggingConfiguration, *bytes.Buffer) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c := loggingFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	t.Cleanup(func() {
		klog.Flush()
		if err := logsapi.ResetForTest(nil); err != nil {
			t.Error(err)
		}
	})
	if err := applyLogging(fs, c, &logsapi.LoggingOptions{ErrorStream: &out, InfoStream: &out}); err != nil {
		t.Fatal(err)
	}
	return c, &out
}

// TestLoggingJSON: with --logging-format=json every line klog writes is a
// JSON object, with the message, its keys and values, the verbosity of an
// info line and the error of an error line; --v still selects the lines.
func TestLoggingJSON(t *testing.T) {
	_, out := applyForTest(t, "--logging-format=json", "--v=3")
	klog.InfoS("Carve starting", "node", "node-a", "volumeGroups", []string{"vg0"})
	klog.V(3).InfoS("CSI call", "method", "/csi.v1.Node/NodeStageVolume")
	klog.V(4).InfoS("Not at --v=3")
	klog.ErrorS(errors.New("lvcreate failed"), "Create failed", "volume", "pvc-1")
	klog.Flush()

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)\nall output:\n%s", l, err, out)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (the V(4) one left out):\n%s", len(lines), out)
	}
	if m := lines[0]; m["msg"] != "Carve starting" || m["node"] != "node-a" || m["v"] != 0.0 {
		t.Errorf("info line %v: want msg, node and v 0", m)
	}
	if vgs, _ := lines[0]["volumeGroups"].([]any); len(vgs) != 1 || vgs[0] != "vg0" {
		t.Errorf("info line %v: volumeGroups not the JSON list [vg0]", lines[0])
	}
	if m := lines[1]; m["msg"] != "CSI call" || m["v"] != 3.0 {
		t.Errorf("V(3) line %v: want msg and v 3", m)
	}
	if m := lines[2]; m["msg"] != "Create failed" || m["err"] != "lvcreate failed" || m["volume"] != "pvc-1" {
		t.Errorf("error line %v: want msg, err and volume", m)
	}
}

// TestLoggingTextDefault: without the flag the format is klog's text, as
// before: header, quoted message, key="value".
func TestLoggingTextDefault(t *testing.T) {
	c, out := applyForTest(t)
	if c.Format != "text" {
		t.Errorf("default --logging-format %q, want text", c.Format)
	}
	klog.InfoS("Carve starting", "node", "node-a")
	klog.Flush()
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "I") || !strings.Contains(line, `] "Carve starting" node="node-a"`) {
		t.Errorf("text line %q: want klog's I... ] \"Carve starting\" node=\"node-a\"", line)
	}
}
