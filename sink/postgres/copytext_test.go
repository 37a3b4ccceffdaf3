package postgres

import (
	"math"
	"strconv"
	"testing"
)

// TestCopyField: each value a change holds becomes the field of COPY's
// text format that PostgreSQL reads back as that value: NULL as \N, text
// with the bytes the format gives a meaning escaped (a backslash that
// would make \N of the text "\N" too), bytes in bytea's hex form or, for
// another column, as they are, and floats as text that parses back to
// the same float32 or float64.
func TestCopyField(t *testing.T) {
	for _, c := range []struct {
		v     any
		bytea bool
		want  string
	}{
		{nil, false, `\N`},
		{int64(-9223372036854775808), false, "-9223372036854775808"},
		{"plain ✓ 😀", false, "plain ✓ 😀"},
		{"\\N", false, `\\N`},
		{"a\tb\nc\rd\\e'f\"g", false, `a\tb\nc\rd\\e'f"g`},
		{"", false, ""},
		{[]byte{0x5c, 0x00, 0xff}, true, `\\x5c00ff`},
		{[]byte{}, true, `\\x`},
		{[]byte("a\\b\tc"), false, `a\\b\tc`},
		{-2.25e100, false, "-2.25e+100"},
		{float32(1.5), false, "1.5"},
	} {
		got, err := appendCopyField(nil, c.v, c.bytea)
		if err != nil || string(got) != c.want {
			t.Errorf("%#v (bytea %v): %q, %v; want %q", c.v, c.bytea, got, err, c.want)
		}
	}
	for _, f := range []float32{0.1, 1e-45, math.MaxFloat32, -3.4e38, 16777217, 1.0000001} {
		got, _ := appendCopyField(nil, f, false)
		as32, err32 := strconv.ParseFloat(string(got), 32)
		as64, err64 := strconv.ParseFloat(string(got), 64)
		if err32 != nil || err64 != nil || float32(as32) != f || as64 != float64(f) {
			t.Errorf("float32 %v as %q reads back as float4 %v, as float8 %v", f, got, float32(as32), as64)
		}
	}
	for _, f := range []float64{0.1, 5e-324, math.MaxFloat64, math.Copysign(0, -1), 1e21, 123456789.123456789} {
		got, _ := appendCopyField(nil, f, false)
		if back, err := strconv.ParseFloat(string(got), 64); err != nil || back != f || math.Signbit(back) != math.Signbit(f) {
			t.Errorf("float64 %v as %q reads back as %v", f, got, back)
		}
	}
	if _, err := appendCopyField(nil, struct{}{}, false); err == nil {
		t.Errorf("a value of no type a change holds has COPY text")
	}
}
