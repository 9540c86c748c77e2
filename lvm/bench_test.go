package lvm

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// BenchmarkParseLVs parses an lvs report of 1000 LVs built from a recorded
// one: a node with many volumes pays this on every list.
func BenchmarkParseLVs(b *testing.B) {
	one, err := os.ReadFile("testdata/linear-lvs.json")
	if err != nil {
		b.Fatal(err)
	}
	lvs, err := parseLVs(one)
	if err != nil || len(lvs) == 0 {
		b.Fatalf("fixture: %v", err)
	}
	start := bytes.Index(one, []byte(`"lv": [`)) + len(`"lv": [`)
	end := bytes.LastIndex(one, []byte("]"))
	entry := bytes.TrimSpace(one[start:bytes.LastIndex(one[:end], []byte("]"))])
	var buf bytes.Buffer
	buf.WriteString(`{"report":[{"lv":[`)
	for i := range 1000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(bytes.Replace(entry, []byte(`"lv_name":"`), []byte(fmt.Sprintf(`"lv_name":"v%d`, i)), 1))
	}
	buf.WriteString(`]}]}`)
	data := buf.Bytes()
	parsed, err := parseLVs(data)
	if err != nil {
		b.Fatalf("synthetic report: %v", err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseLVs(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(parsed)), "ns/lv")
	b.ReportMetric(float64(len(parsed)), "lvs/report")
}
