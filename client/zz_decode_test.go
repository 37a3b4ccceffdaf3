package client

import (
	"bytes"
	"os"
	"testing"
)

func BenchmarkZZDecode(b *testing.B) {
	data, err := os.ReadFile("/tmp/flat.ndjson")
	if err != nil {
		b.Skip(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte{'\n'})
	rows := 0
	var d lineDecoder
	var v MessageView
	for _, l := range lines {
		if d.decode(l, &v) {
			rows += v.Rows()
		}
	}
	n := 0
	for b.Loop() {
		for _, l := range lines {
			if !d.decode(l, &v) {
				b.Fatal("decode")
			}
			for r := range v.Rows() {
				for c := range v.Columns() {
					x, _ := v.Value(r, c)
					n += len(x)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
}
