package main

import (
	"flag"
	"fmt"

	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
)

// The logging flags of Kubernetes' components that carve offers: the
// others (--log-json-split-stream, ...) are alpha, behind a feature gate
// carve does not have. klog's older flags (--logtostderr, --log_dir, ...)
// are not offered either, as in Kubernetes' own components: klog hands
// every line to the chosen format, which would ignore them.
var loggingFlagNames = []string{"v", "vmodule", "logging-format", "log-flush-frequency"}

// loggingFlags registers on fs --v, --vmodule, --logging-format (text,
// klog's lines, the default; or json, one JSON object a line) and
// --log-flush-frequency, as Kubernetes' component-base defines them.
func loggingFlags(fs *flag.FlagSet) *logsapi.LoggingConfiguration {
	c := logsapi.NewLoggingConfiguration()
	all := flag.NewFlagSet("logging", flag.ContinueOnError)
	logsapi.AddGoFlags(c, all)
	for _, name := range loggingFlagNames {
		f := all.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	return c
}

// applyLogging validates the logging flags and makes klog (and so
// controller-runtime, whose logger is klog's) write in their format to
// stderr, or to o's streams when o is not nil. Once per process.
func applyLogging(fs *flag.FlagSet, c *logsapi.LoggingConfiguration, o *logsapi.LoggingOptions) error {
	if err := logsapi.ValidateAndApplyWithOptions(c, o, nil); err != nil {
		usage := ""
		if f := fs.Lookup("logging-format"); f != nil {
			usage = f.Usage
		}
		return fmt.Errorf("logging flags: %w (--logging-format: %s)", err, usage)
	}
	return nil
}
