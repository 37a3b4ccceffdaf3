package change

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is a place in one source's binlog: a file name and a byte offset.
// Positions compare by file sequence number first (binlog.000002 comes after
// binlog.000001), then by offset.
type Position struct {
	File string `json:"file"`
	Pos  uint32 `json:"pos"`
}

// String renders "file:pos", the form stream messages carry.
func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// IsZero reports whether p names no place.
func (p Position) IsZero() bool { return p.File == "" }

// Compare returns -1, 0 or +1 as p is before, at or after q.
func (p Position) Compare(q Position) int {
	if p.File != q.File {
		ps, qs := fileSeq(p.File), fileSeq(q.File)
		if ps != qs {
			if ps < qs {
				return -1
			}
			return 1
		}
		return strings.Compare(p.File, q.File)
	}
	switch {
	case p.Pos < q.Pos:
		return -1
	case p.Pos > q.Pos:
		return 1
	}
	return 0
}

// fileSeq is the numeric suffix of a binlog file name ("mysql-bin.000042" → 42).
func fileSeq(name string) int64 {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}
