package change

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestFormatFloat: FLOAT and DOUBLE text is Java's Float.toString and
// Double.toString, as canal writes it.
func TestFormatFloat(t *testing.T) {
	cases := []struct {
		f    float64
		bits int
		want string
	}{
		{3, 32, "3.0"}, {3.5, 32, "3.5"}, {-0.25, 32, "-0.25"}, {0, 64, "0.0"}, {math.Copysign(0, -1), 64, "-0.0"},
		{0.001, 64, "0.001"}, {0.0009, 64, "9.0E-4"}, {1.5e-7, 64, "1.5E-7"}, {float64(float32(1.5e-7)), 32, "1.5E-7"},
		{9999999, 64, "9999999.0"}, {1e7, 64, "1.0E7"}, {1.234e10, 64, "1.234E10"}, {-2.2250738585072014e-308, 64, "-2.2250738585072014E-308"},
		{1e100, 64, "1.0E100"}, {float64(float32(33.333332)), 32, "33.333332"}, {2.718281828459045, 64, "2.718281828459045"},
		{math.Inf(1), 64, "Infinity"}, {math.NaN(), 64, "NaN"},
	}
	for _, c := range cases {
		if got := formatFloat(c.f, c.bits); got != c.want {
			t.Errorf("formatFloat(%v, %d) = %q, want %q", c.f, c.bits, got, c.want)
		}
	}
	// In plain notation the text has a fraction exactly when Go's shortest
	// digits have a point, or else gets ".0": for values spread over the
	// range, integers among them, in both widths.
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200_000 {
		f := math.Pow(10, rng.Float64()*10-3) // 10^-3 .. 10^7
		switch rng.IntN(3) {
		case 0:
			f = math.Round(f)
		case 1:
			f = math.Round(f*8) / 8
		}
		for _, bits := range []int{32, 64} {
			v := f
			if bits == 32 {
				v = float64(float32(f))
			}
			if math.Abs(v) < 1e-3 || math.Abs(v) >= 1e7 {
				continue
			}
			want := strconv.FormatFloat(v, 'f', -1, bits)
			if !strings.Contains(want, ".") {
				want += ".0"
			}
			if got := formatFloat(v, bits); got != want {
				t.Fatalf("formatFloat(%v, %d) = %q, want %q", v, bits, got, want)
			}
		}
	}
}

// TestDatetimeText: the datetime text written in one piece is the one
// written field by field, for every field value in range, every fraction
// width, and out-of-range fields (which take the field-by-field path).
func TestDatetimeText(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	check := func(y, mo, d, h, mi, s, us, dec int) {
		t.Helper()
		got := appendDatetime([]byte("<"), y, mo, d, h, mi, s, us, dec)
		want := appendDatetimeSlow([]byte("<"), y, mo, d, h, mi, s, us, dec)
		if string(got) != string(want) {
			t.Fatalf("%d-%d-%d %d:%d:%d.%d/%d: %q, want %q", y, mo, d, h, mi, s, us, dec, got, want)
		}
	}
	for v := range 100 {
		for dec := range 7 {
			check(v*101, v, v, v, v, v, v*10101, dec)
		}
	}
	for range 100_000 {
		check(rng.IntN(10000), rng.IntN(13), rng.IntN(32), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000000), rng.IntN(7))
	}
	check(10000, 1, 1, 0, 0, 0, 0, 0) // a damaged image's year
	check(2026, 1, 1, 0, 0, 0, 1234567, 6)
	if got := string(appendDatetime(nil, 2026, 12, 1, 21, 53, 7, 120000, 3)); got != "2026-12-01 21:53:07.120" {
		t.Errorf("got %q", got)
	}
}
