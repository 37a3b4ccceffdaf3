package canal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func frame(n uint32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), body...)
}

func TestReadFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want []byte
		err  error
	}{
		{"empty body", frame(0, nil), []byte{}, nil},
		{"body", frame(3, []byte("abc")), []byte("abc"), nil},
		{"nothing", nil, nil, io.EOF},
		{"short header", []byte{0, 0}, nil, io.ErrUnexpectedEOF},
		{"truncated body", frame(10, []byte("abc")), nil, io.ErrUnexpectedEOF},
		{"truncated big body", frame(1<<20, make([]byte, 100<<10)), nil, io.ErrUnexpectedEOF},
		{"over the limit", frame(MaxClientFrame+1, nil), nil, ErrFrameTooLarge},
		{"2 GiB header", frame(1<<31, nil), nil, ErrFrameTooLarge},
		{"4 GiB header", frame(1<<32-1, nil), nil, ErrFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tc.in), MaxClientFrame)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && !bytes.Equal(got, tc.want) {
				t.Fatalf("body %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadFrameLarge reads a frame larger than one read chunk.
func TestReadFrameLarge(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 100_000)
	b, err := AppendFrame(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, frame(1, []byte("x"))...)
	r := bytes.NewReader(b)
	got, err := ReadFrame(r, MaxClientFrame)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("large frame: %v, %d bytes", err, len(got))
	}
	got, err = ReadFrame(r, MaxClientFrame)
	if err != nil || string(got) != "x" {
		t.Fatalf("frame after it: %v %q", err, got)
	}
}

// TestReadFrameHugeHeaderAllocates: a 2 GiB header under a 4 GiB limit,
// with only a few bytes behind it, allocates about one read chunk, not the
// promised length.
func TestReadFrameHugeHeaderAllocates(t *testing.T) {
	in := frame(1<<31, []byte("tiny"))
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := ReadFrame(bytes.NewReader(in), 1<<32); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations", allocs)
	}
}

// FuzzReadFrame: the decoder never panics, never returns a body longer
// than the limit, and a frame it accepts re-encodes to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame(0, nil))
	f.Add(frame(3, []byte("abc")))
	f.Add(frame(10, []byte("abc")))
	f.Add(frame(1<<31, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2})
	f.Add([]byte{0, 0})
	f.Add(append(frame(2, []byte("ab")), frame(1, []byte("c"))...))
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 1 << 16
		r := bytes.NewReader(in)
		for {
			before := len(in) - r.Len()
			body, err := ReadFrame(r, limit)
			if err != nil {
				if len(body) != 0 {
					t.Fatalf("error %v with a body", err)
				}
				return
			}
			if len(body) > limit {
				t.Fatalf("body of %d bytes over the limit", len(body))
			}
			re, err := AppendFrame(nil, body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(re, in[before:len(in)-r.Len()]) {
				t.Fatalf("frame does not round-trip")
			}
		}
	})
}
