package runner

import (
	"strings"
	"testing"
)

func TestShellLine(t *testing.T) {
	reportConfig := `report/time_format="%s" report/binary_values_as_numeric=0 report/list_item_separator=","`
	for _, tc := range []struct {
		args []string
		want string // "" when the shell cannot carry the command
	}{
		{[]string{"lvchange", "--addtag", "carve.dev/owner=x", "vg/lv"}, "lvchange --addtag carve.dev/owner=x vg/lv"},
		{[]string{"lvs", "--reportformat", "json", "--config", reportConfig, "-o", "lv_name", "vg"},
			`lvs --config '` + reportConfig + `' -o lv_name vg`},
		{[]string{"lvs", "--reportformat=json", "vg"}, "lvs vg"},
		{[]string{"vgs", "--report-format", "json", "vg"}, "vgs vg"},
		{[]string{"pvs", "--reportf", "json"}, "pvs"},
		{[]string{"lvcreate", "-n", "a b", "--addtag", "it's", "--addtag", "", "--addtag", "#x", "vg"},
			`lvcreate -n 'a b' --addtag "it's" --addtag '' --addtag '#x' vg`},
		{[]string{"lvchange", "-ay", "-K", "vg/lv"}, "lvchange -ay -K vg/lv"},
		{[]string{"lvs", "--reportformat", "json", "-vvvv", "vg"}, ""}, // prefixed output
		{[]string{"lvs", "--reportformat", "json", "-qv", "vg"}, ""},   // likewise, in a cluster
		{[]string{"lvchange", "--verbose", "-an", "vg/lv"}, ""},        // likewise
		{[]string{"lvcreate", "-d", "-n", "x", "vg"}, ""},              // debug
		{[]string{"pvcreate", "/dev/sdx"}, ""},                         // sizes a device
		{[]string{"vgextend", "vg", "/dev/sdx"}, ""},                   // likewise
		{[]string{"lvchange", "--addtag", `a'b"c`, "vg/lv"}, ""},       // both quotes
		{[]string{"lvchange", "--addtag", "a\nb", "vg/lv"}, ""},        // newline
		{[]string{"lvchange", "--addtag", "a\tb", "vg/lv"}, ""},        // control character
		{[]string{"lvchange", "--addtag", "caf\u00e9", "vg/lv"}, ""},   // not ASCII
		{[]string{"lvs", "vg"}, ""},                                    // a column report
		{[]string{"lvs", "--reportformat", "basic", "vg"}, ""},         // likewise
		{[]string{"lvs", "--reportformat", "json", "--command-profile", "p", "vg"}, ""},
		{[]string{"lvs", "--reportformat", "json", "--commandprof", "p", "vg"}, ""},
		{[]string{"lvs", "--reportformat"}, ""},
		{[]string{"lvs", "--reportformat", "json", "--logonly", "vg"}, ""},
		{[]string{"lvs", "--reportformat", "json", "-h"}, ""},
		{[]string{"lvcreate", "--config", "log/report_command_log=0", "vg"}, ""},
		{[]string{"lvcreate", "--config=report/output_format=basic", "vg"}, ""},
		{[]string{"lvcreate", "--conf", "log/command_log_selection=all", "vg"}, ""},
		{[]string{"lvchange", "--addtag", "--profile", "vg/lv"}, ""}, // refused even as a value: a process is always right
		{[]string{"lvmconfig", "global/locking_dir"}, ""},            // not a shell command
		{[]string{"version"}, ""},
		{[]string{"exit"}, ""},
		{nil, ""},
		{append([]string{"lvchange"}, make([]string, shellMaxArgs)...), ""},
	} {
		got, ok := shellLine(tc.args)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("shellLine(%q) = %q, %v; want %q", tc.args, got, ok, tc.want)
		}
	}
}

// The group lvm2's shell writes after a failed lvs with a report, as
// captured from lvm2 2.03.16 with the lvmdbusd profile, plus a message
// holding a quote and a backslash, which lvm2 does not escape.
const sampleGroup = `  {
      "report": [
          {
              "lv": [
                  {"lv_name":"a"}
              ]
          }
      ]
      ,
      "log": [
          {"log_seq_num":"1", "log_type":"error", "log_context":"processing", "log_object_type":"vg", "log_object_name":"nosuchvg", "log_object_id":"", "log_object_group":"", "log_object_group_id":"", "log_message":"Volume group \"nosuchvg\" not found", "log_errno":"-1", "log_ret_code":"0"},
          {"log_seq_num":"2", "log_type":"warn", "log_context":"processing", "log_object_type":"vg", "log_object_name":"x", "log_object_id":"", "log_object_group":"", "log_object_group_id":"", "log_message":"path C:\dir", "log_errno":"-1", "log_ret_code":"0"},
          {"log_seq_num":"3", "log_type":"print", "log_context":"processing", "log_object_type":"vg", "log_object_name":"x", "log_object_id":"", "log_object_group":"", "log_object_group_id":"", "log_message":"said \"hi\", \"log_type\":\"x\\"", "log_errno":"-1", "log_ret_code":"0"},
          {"log_seq_num":"4", "log_type":"status", "log_context":"shell", "log_object_type":"cmd", "log_object_name":"lvs", "log_object_id":"", "log_object_group":"", "log_object_group_id":"", "log_message":"failure", "log_errno":"0", "log_ret_code":"5"}
      ]
  }
`

func TestLogRows(t *testing.T) {
	rows := logRows(sampleGroup)
	if len(rows) != 4 {
		t.Fatalf("rows = %v", rows)
	}
	if got := rows[0]["log_message"]; got != `Volume group "nosuchvg" not found` {
		t.Errorf("message = %q", got)
	}
	if got := rows[1]["log_message"]; got != `path C:\dir` {
		t.Errorf("message with a backslash = %q", got)
	}
	if got := rows[2]["log_message"]; got != `said "hi", "log_type":"x\"` || rows[2]["log_type"] != "print" {
		t.Errorf("message that looks like a field = %q (type %q)", got, rows[2]["log_type"])
	}
	name, ret, ok := shellStatus(rows)
	if !ok || name != "lvs" || ret != 5 || exitCode(ret) != 5 {
		t.Errorf("status = %q %d %v", name, ret, ok)
	}
	out, errs := logMessages(rows)
	if out != "  said \"hi\", \"log_type\":\"x\\\"\n" || errs != "  Volume group \"nosuchvg\" not found\n  path C:\\dir\n" {
		t.Errorf("messages: stdout %q, stderr %q", out, errs)
	}
	want := strings.Split(sampleGroup, "\n      ,\n")[0] + "\n  }\n"
	if got := reportPart(sampleGroup); got != want {
		t.Errorf("reportPart = %q, want %q", got, want)
	}
	if got := reportPart("  {\n      \"log\": [\n      ]\n  }\n"); got != "" {
		t.Errorf("reportPart of a log alone = %q", got)
	}
	if exitCode(1) != 0 {
		t.Error("ECMD_PROCESSED is not exit status 0")
	}
}
