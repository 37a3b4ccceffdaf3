package client

import (
	"encoding/json"
	"testing"
)

// BenchmarkDecodeLine decodes an INSERT of 50 rows of the consumer
// benchmark's orders table (11 columns) with encoding/json, with
// lineDecoder into Message's maps (Stream), and with lineDecoder into a
// view whose every value is read (StreamViews); then the same message in
// braid's binary encoding, into a view and into Message's maps.
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
		var v MessageView
		for b.Loop() {
			if !d.decode(line, &v) {
				b.Fatal("the decoder gave up")
			}
			_ = v.Message()
		}
	})
	b.Run("view", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		var d lineDecoder
		var v MessageView
		n := 0
		for b.Loop() {
			if !d.decode(line, &v) {
				b.Fatal("the decoder gave up")
			}
			n += readValues(&v)
		}
		if n == 0 {
			b.Fatal("no values")
		}
	})
	var d lineDecoder
	var v MessageView
	if !d.decode(line, &v) {
		b.Fatal("the decoder gave up")
	}
	frame := binaryFrameOf(&v)
	b.Run("binary-view", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if err := d.decodeBinary(frame, &v); err != nil {
				b.Fatal(err)
			}
			n += readValues(&v)
		}
		if n == 0 {
			b.Fatal("no values")
		}
	})
	b.Run("binary-message", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if err := d.decodeBinary(frame, &v); err != nil {
				b.Fatal(err)
			}
			_ = v.Message()
		}
	})
}

// readValues reads every value of a view's rows, as a consumer that
// applies them does, and returns their bytes.
func readValues(v *MessageView) int {
	n := 0
	for r := range v.Rows() {
		for c := range v.Columns() {
			val, _ := v.Value(r, c)
			n += len(val)
		}
	}
	return n
}
