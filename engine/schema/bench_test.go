package schema_test

import (
	"testing"

	"github.com/braid-cdc/braid/engine/schema"
)

// BenchmarkSchemaApplyDDLBegin: every query event goes through ApplyDDL;
// the ones that are not DDL must cost next to nothing (no parser, no
// allocation).
func BenchmarkSchemaApplyDDLBegin(b *testing.B) {
	s := schema.NewTracker()
	if err := s.LoadCreate(schPos(4), "db", "CREATE TABLE t (a int)"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	pos := schPos(100)
	for b.Loop() {
		if _, err := s.ApplyDDL(pos, "db", "BEGIN", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchemaApplyDDLAlter is the cost of a real DDL, for comparison.
func BenchmarkSchemaApplyDDLAlter(b *testing.B) {
	s := schema.NewTracker()
	if err := s.LoadCreate(schPos(4), "db", "CREATE TABLE t (id int PRIMARY KEY, a int)"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := uint32(100)
	for b.Loop() {
		n += 2
		if _, err := s.ApplyDDL(schPos(n), "db", "ALTER TABLE t ADD b int", 0); err != nil {
			b.Fatal(err)
		}
		if _, err := s.ApplyDDL(schPos(n+1), "db", "ALTER TABLE t DROP b", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSchemaApplyDDLBeginAllocs pins the benchmark's point in a test.
func TestSchemaApplyDDLBeginAllocs(t *testing.T) {
	s := schema.NewTracker()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.ApplyDDL(schPos(100), "db", "  /* c */ BEGIN", 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("ApplyDDL(BEGIN) allocates %.0f times", allocs)
	}
}
