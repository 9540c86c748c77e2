package runner

import (
	"regexp"
	"strconv"
	"strings"
)

// The text side of the lvm shell protocol (shell.go): how a command goes
// onto the shell's command line, and how the JSON report group that the
// shell writes after every command is read.

// shellMaxArgs bounds the arguments of one shell line. lvm2's shell splits
// a line into at most MAX_ARGS (64) words and refuses a line that reaches
// it ("Too many arguments, sorry."); the margin is for nothing in
// particular, it only keeps clear of the edge.
const shellMaxArgs = 60

// shellCommands are the lvm2 subcommands the shell runs: the reports and
// the commands that change LVs and VGs. Any other one (lvmconfig, version,
// help...) prints straight to stdout or behaves differently in the shell
// (`version` queries the kernel there, an unknown name is run as a script
// by `lvm name` but not by the shell), so it runs as a process.
//
// Neither do the commands that take a device into use or size it (pvcreate,
// pvresize, vgcreate, vgextend; pvremove and pvchange go with them): lvm2
// caches a device's size between the commands of one shell, and forgets it
// only when a command releases a VG lock. Measured with 2.03.16: a loop
// device attached after the shell started (its node there before, 0
// sectors) stayed "too small to hold a PV" for the shell's next pvs while a
// process saw the new PV. They are rare; a process reads sizes afresh.
var shellCommands = map[string]bool{
	"lvs": true, "vgs": true, "pvs": true,
	"lvcreate": true, "lvchange": true, "lvremove": true, "lvextend": true, "lvreduce": true,
	"lvresize": true, "lvrename": true, "lvconvert": true,
	"vgchange": true, "vgreduce": true, "vgremove": true, "vgrename": true, "vgmknodes": true, "vgck": true,
}

// reportCommands print a report: the shell renders every report as JSON
// (the profile's report/output_format; the shell fixes the format when it
// starts and ignores --reportformat), so they go through it only when the
// caller asked for JSON anyway.
var reportCommands = map[string]bool{"lvs": true, "vgs": true, "pvs": true}

// shellRefusedOptions change what the shell depends on for the one command:
// another command profile replaces the one that makes the shell report in
// JSON with a command log, --logonly drops the report, help and version
// print plain text. Names are as lvm2 compares them, hyphens removed.
var shellRefusedOptions = map[string]bool{
	"--commandprofile": true, "--profile": true, "--logonly": true,
	"--help": true, "--version": true, "-h": true, "-?": true,
	"--verbose": true, "--debug": true,
}

// shellRefusedShort are short options refused anywhere in a cluster of
// them ("-vvvv", "-qv"): verbose and debug output. At -vvvv lvm2 prefixes
// every line it writes, the report's too, with a time and a source line,
// which breaks the group's framing. A value glued to an option ("-ndata")
// may hold one of these letters too; such a command merely runs as a
// process.
const shellRefusedShort = "vd"

// shellRefusedConfig are the lvm.conf settings lvm2 refuses in a --config
// given to a shell command (CFG_DISALLOW_INTERACTIVE in lvm2's
// config_settings.h): with one of them the command fails in the shell and
// not as a process.
var shellRefusedConfig = []string{"output_format", "report_command_log", "command_log_", "profile_dir"}

// shellLine renders `lvm args...` as one line of lvm2's shell, or reports
// that the shell cannot run it exactly as a process would.
//
// lvm2's shell (lvm_split in tools/lvmcmdline.c) splits a line on
// whitespace; a word that starts with ' or " runs to the next same quote,
// with no escapes; a word starting with # starts a comment. So an argument
// is written bare when it has no space, quote or leading #, in single
// quotes when it has no single quote, in double quotes when it has no
// double quote, and otherwise cannot be written: the command then runs as a
// process. Only printable ASCII goes through (the line editor reading the
// shell's input may treat control or non-ASCII bytes specially; a newline
// would end the line).
//
// "--reportformat json" is left out: the shell reports in JSON whatever a
// command says, and lvm2 after 2.03.16 refuses the option in its shell
// ("cannot be used in interactive mode").
func shellLine(args []string) (string, bool) {
	if len(args) == 0 || len(args) > shellMaxArgs || !shellCommands[args[0]] {
		return "", false
	}
	jsonReport := false
	words := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if i > 0 && strings.HasPrefix(a, "-") {
			opt, val, hasVal := longOption(a)
			if opt == "" {
				opt = a // a short option
				if !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], shellRefusedShort) {
					return "", false
				}
			}
			for r := range shellRefusedOptions {
				if abbreviates(opt, r) {
					return "", false
				}
			}
			if abbreviates(opt, "--reportformat") {
				if !hasVal {
					if i+1 == len(args) {
						return "", false
					}
					i++
					val = args[i]
				}
				if val != "json" {
					return "", false
				}
				jsonReport = true
				continue
			}
			if abbreviates(opt, "--config") {
				if !hasVal && i+1 < len(args) {
					val = args[i+1]
				}
				for _, s := range shellRefusedConfig {
					if strings.Contains(val, s) {
						return "", false
					}
				}
			}
		}
		w, ok := shellWord(a)
		if !ok {
			return "", false
		}
		words = append(words, w)
	}
	if reportCommands[args[0]] && !jsonReport {
		return "", false
	}
	return strings.Join(words, " "), true
}

// abbreviates tells whether opt names the option name: lvm2 parses long
// options with getopt_long, which takes any unambiguous prefix. Short
// options are compared whole.
func abbreviates(opt, name string) bool {
	if !strings.HasPrefix(opt, "--") || !strings.HasPrefix(name, "--") {
		return opt == name
	}
	return len(opt) > 3 && strings.HasPrefix(name, opt)
}

// longOption splits "--some-opt=v" into lvm2's name for the option
// ("--someopt": lvm2 drops the hyphens of a long option's name) and, when
// there is an "=", its value; opt is "" when a is not a long option.
func longOption(a string) (opt, val string, hasVal bool) {
	if !strings.HasPrefix(a, "--") || a == "--" {
		return "", "", false
	}
	name, val, hasVal := strings.Cut(a[2:], "=")
	return "--" + strings.ReplaceAll(name, "-", ""), val, hasVal
}

// shellWord quotes one argument for lvm2's shell, if it can be.
func shellWord(a string) (string, bool) {
	for i := 0; i < len(a); i++ {
		if c := a[i]; c < 0x20 || c > 0x7e {
			return "", false
		}
	}
	switch {
	case a != "" && !strings.ContainsAny(a, ` '"`) && a[0] != '#':
		return a, true
	case !strings.Contains(a, "'"):
		return "'" + a + "'", true
	case !strings.Contains(a, `"`):
		return `"` + a + `"`, true
	}
	return "", false
}

// groupEnd ends the JSON report group lvm2 writes after each shell
// command: libdevmapper indents the group's own braces by two spaces and
// everything inside it deeper, one row to a line.
const groupEnd = "\n  }\n"

// logSection starts the command log inside a group that also holds a
// report: `"report": [...]` then `,` then `"log": [...]`.
const logSection = "\n      ,\n      \"log\": ["

// reportPart is the part of group that the same command run as a process
// prints on stdout: the group without its command log, or nothing when
// the group holds only the log (a command that reports nothing).
func reportPart(group string) string {
	i := strings.Index(group, logSection)
	if i < 0 {
		return ""
	}
	return group[:i] + groupEnd
}

// logKeyRE finds a command log field's name and the start of its value.
var logKeyRE = regexp.MustCompile(`"(log_[a-z_]+)":"`)

// logRow is one row of lvm2's command log: log_type, log_context,
// log_object_name, log_message, log_ret_code...
type logRow map[string]string

// logRows reads the command log rows of a group. lvm2 writes each row on
// a line of its own and escapes only the double quote inside a value (a
// backslash or a control character goes through as it is, so the text is
// not always valid JSON): a value runs from its field's `"name":"` to the
// `", "` before the next field's name, or to the row's final `"}`.
func logRows(group string) []logRow {
	var rows []logRow
	_, log, ok := strings.Cut(group, `"log": [`)
	if !ok {
		return nil
	}
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), ",")
		if !strings.HasPrefix(line, `{"log_`) || !strings.HasSuffix(line, `"}`) {
			continue
		}
		body := line[1 : len(line)-1]
		var keys [][]int
		for _, m := range logKeyRE.FindAllStringSubmatchIndex(body, -1) {
			if m[0] == 0 || (m[0] >= 3 && body[m[0]-3:m[0]] == `", `) {
				keys = append(keys, m)
			}
		}
		row := logRow{}
		for i, m := range keys {
			end := len(body) - 1
			if i+1 < len(keys) {
				end = keys[i+1][0] - 3
			}
			if end < m[1] {
				continue
			}
			row[body[m[2]:m[3]]] = strings.ReplaceAll(body[m[1]:end], `\"`, `"`)
		}
		rows = append(rows, row)
	}
	return rows
}

// shellStatus finds the shell's own status row among rows (the last one
// with log_context "shell" and log_type "status"): the command's name and
// lvm2's return code for it.
func shellStatus(rows []logRow) (name string, ret int, ok bool) {
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if r["log_context"] != "shell" || r["log_type"] != "status" {
			continue
		}
		n, err := strconv.Atoi(r["log_ret_code"])
		if err != nil {
			return "", 0, false
		}
		return r["log_object_name"], n, true
	}
	return "", 0, false
}

// shellName is the command a lastlog's rows are of: the name in its shell
// status row, "" when there is none.
func shellName(rows []logRow) string {
	name, _, _ := shellStatus(rows)
	return name
}

// exitCode is the exit status of an lvm2 process whose command returned
// ret (lvm_return_code: ECMD_PROCESSED, 1, is success).
func exitCode(ret int) int {
	if ret == 1 {
		return 0
	}
	return ret
}

// logMessages renders rows as the same command run as a process prints
// them: lvm2's prefix (log/prefix, two spaces by default) and the message,
// errors and warnings on stderr, log_print's lines on stdout. Status rows
// are the log's own bookkeeping; notices and debug lines are printed only
// with -v, and then straight to stderr, not into the log.
func logMessages(rows []logRow) (stdout, stderr string) {
	var out, errs strings.Builder
	for _, r := range rows {
		switch r["log_type"] {
		case "print":
			out.WriteString("  " + r["log_message"] + "\n")
		case "error", "fatal", "warn":
			errs.WriteString("  " + r["log_message"] + "\n")
		}
	}
	return out.String(), errs.String()
}
