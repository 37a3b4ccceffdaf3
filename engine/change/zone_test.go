package change

import (
	"encoding/binary"
	"testing"
	"time"
)

// TestZoneClock checks appendTimestamp2's wall clock against time's, in
// UTC, a fixed offset and a zone with daylight saving time, over the
// TIMESTAMP range: values close together (one cached span after another)
// and far apart (a lookup each).
func TestZoneClock(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no zone database:", err)
	}
	for _, loc := range []*time.Location{time.UTC, time.FixedZone("-05:30", -5*3600-1800), ny} {
		z := NewZoneClock(loc)
		for _, r := range []struct{ from, to, step int64 }{
			{1, 1 << 32, 7919 * 13},                            // the whole range, a lookup each
			{1_700_000_000, 1_700_000_000 + 3*365*86400, 3607}, // three years, hour by hour: spans reused
		} {
			for sec := r.from; sec < r.to; sec += r.step {
				var data [4]byte
				binary.BigEndian.PutUint32(data[:], uint32(sec))
				got, _ := appendTimestamp2(nil, data[:], 0, z)
				if want := time.Unix(sec, 0).In(loc).Format("2006-01-02 15:04:05"); string(got) != want {
					t.Fatalf("%d in %v: %s, want %s", sec, loc, got, want)
				}
			}
		}
	}
}
