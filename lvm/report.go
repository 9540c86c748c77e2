package lvm

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Every report names its fields explicitly (never the defaults, which
// lvm.conf can change) and asks for byte units without suffix, so sizes parse
// as plain integers. lvm2's "json" report format renders every value as a
// string; an absent value (e.g. data_percent of a linear LV) is "".
//
// testdata/capture.sh records fixtures with these same lists;
// TestCaptureScriptUsesClientFields keeps the two in step.
//
// lvFields holds LV fields (and VG ones, one value per LV) only: one
// segment field (stripes, zero, devices...) makes lvs print a row per
// segment, so an extended LV would be listed twice.
const (
	pvFields = "pv_name,vg_name,pv_uuid,pv_size,pv_free,pv_missing,pv_attr"
	vgFields = "vg_name,vg_uuid,vg_size,vg_free,vg_extent_size,vg_extent_count,vg_free_count," +
		"pv_count,vg_missing_pv_count,lv_count,vg_attr,vg_tags,vg_mda_size,vg_mda_free"
	lvFields = "lv_name,vg_name,lv_uuid,lv_path,lv_dm_path,lv_size,lv_attr,lv_tags,lv_layout,lv_role," +
		"lv_active,lv_device_open,pool_lv,origin,data_percent,metadata_percent,lv_health_status," +
		"copy_percent,vg_extent_size,raid_sync_action,raid_mismatch_count,lv_when_full," +
		"lv_metadata_size,lv_check_needed,lv_time,lv_kernel_major,lv_kernel_minor,vg_missing_pv_count"
)

// reportConfig pins the lvm.conf settings that change how values are
// rendered, so that a host's lvm.conf cannot break parsing: times as Unix
// seconds (the default is a local date format), binary fields as words
// ("active", "open"; numeric would read as false), hidden LVs in brackets,
// tags separated by commas.
const reportConfig = `report/time_format="%s" report/binary_values_as_numeric=0 ` +
	`report/mark_hidden_devices=1 report/list_item_separator=","`

// reportArgs are the options shared by every pvs/vgs/lvs call.
func reportArgs(fields string) []string {
	return []string{"--reportformat", "json", "--units", "b", "--nosuffix",
		"--config", reportConfig, "-o", fields}
}

// jsonReport is lvm2's JSON envelope: {"report":[{"lv":[{...}]}]}. One
// command may emit several report objects; rows of all are returned.
type jsonReport[T any] struct {
	Report []map[string][]T `json:"report"`
}

// decodeReport returns the rows listed under key ("pv", "vg" or "lv").
func decodeReport[T any](out []byte, key string) ([]T, error) {
	var r jsonReport[T]
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("parse lvm %s report: %w", key, err)
	}
	var rows []T
	for _, section := range r.Report {
		rows = append(rows, section[key]...)
	}
	return rows, nil
}

// fieldParser converts report strings and remembers the first error, so
// that converting a row reads as a list of assignments.
type fieldParser struct{ err error }

func (p *fieldParser) uint(field, v string) uint64 {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("field %s: %w", field, err)
	}
	return n
}

func (p *fieldParser) int(field, v string) int {
	n := p.uint(field, v)
	if n > uint64(maxInt) {
		p.fail(field, v)
		return 0
	}
	return int(n)
}

const maxInt = int(^uint(0) >> 1)

// percent parses lvm2's "12.34"; "" (not applicable) is 0.
func (p *fieldParser) percent(field, v string) float64 {
	if v == "" {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		// ParseFloat takes "NaN" and "Inf", which lvm2 never prints.
		p.fail(field, v)
		return 0
	}
	return f
}

// deviceNumber parses a kernel major or minor number: lvm2 prints -1 for an
// LV without a device (inactive), and fixtures recorded before the field
// was asked for have "": both are -1, "no device".
func (p *fieldParser) deviceNumber(field, v string) int {
	if v == "" || v == "-1" {
		return -1
	}
	n := p.uint(field, v)
	if n > 1<<20 {
		// Linux majors have 12 bits, minors 20.
		p.fail(field, v)
		return -1
	}
	return int(n)
}

// unixTime parses a time rendered with time_format "%s"; "" (unknown) is
// the zero time.
func (p *fieldParser) unixTime(field, v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.fail(field, v)
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

func (p *fieldParser) fail(field, v string) {
	if p.err == nil {
		p.err = fmt.Errorf("field %s: unexpected value %q", field, v)
	}
}

// splitTags splits lvm2's comma-separated tag list. Tags cannot contain
// commas, so the split is exact.
func splitTags(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// attrAt returns byte i of an attr string, or '-' when it is too short, so
// that odd input never panics.
func attrAt(attr string, i int) byte {
	if i < len(attr) {
		return attr[i]
	}
	return '-'
}

// RoundUp rounds size up to a multiple of extent (extent 0 leaves size as
// is). It never rounds down: a volume gets at least what was asked for.
// When no multiple of extent at or above size fits in a uint64 it returns 0,
// which every caller already refuses as a size.
func RoundUp(size, extent uint64) uint64 {
	if extent == 0 || size%extent == 0 {
		return size
	}
	n := size/extent + 1
	if n > ^uint64(0)/extent {
		return 0
	}
	return n * extent
}
