package client

import (
	"fmt"
	"testing"
)

// TestDedupe replays streams as a server does after reconnects: from the
// last ack, so transactions come again whole, complete ones and the one in
// progress. Only new messages pass.
func TestDedupe(t *testing.T) {
	// Each string is one connection; each number a message's seq.
	conns := [][]uint64{
		{1, 2, 2, 2, 3},       // cut inside 3 (which has 3 messages)
		{2, 2, 2, 3, 3, 3, 4}, // replay from 2 (ack of 1 only)
		{3, 3, 3, 4, 4},       // replay from 3; 4 has two messages
		{4, 4, 5},
		{5, 6},
	}
	want := []uint64{1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 6}
	d := &dedupe{}
	var got []uint64
	for _, conn := range conns {
		d.connected()
		for _, seq := range conn {
			if d.admit(seq) {
				got = append(got, seq)
				d.handled(seq)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	if d.done != 5 || d.cur != 6 {
		t.Errorf("done %d cur %d, want 5 and 6", d.done, d.cur)
	}
	d.checkpoint(6)
	d.connected()
	if d.admit(6) {
		t.Error("a checkpointed transaction came again and passed")
	}
	// A resume point says 1-3 are handled.
	d = &dedupe{done: 3}
	d.connected()
	for _, seq := range []uint64{3, 3, 4} {
		if d.admit(seq) != (seq == 4) {
			t.Errorf("after resume at 3, seq %d: wrong", seq)
		}
	}
}
