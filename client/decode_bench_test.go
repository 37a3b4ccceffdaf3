package client

import (
	"encoding/json"
	"testing"
)

// BenchmarkDecodeLine decodes an INSERT of 50 rows of the consumer
// benchmark's orders table (11 columns) with encoding/json, as the client
// did, and with lineDecoder.
func BenchmarkDecodeLine(b *testing.B) {
	line := benchLine(50)
	b.Run("json", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			var env envelope
			if err := json.Unmarshal(line, &env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		var d lineDecoder
		for b.Loop() {
			var env envelope
			if !d.decode(line, &env) {
				b.Fatal("the decoder gave up")
			}
		}
	})
}
