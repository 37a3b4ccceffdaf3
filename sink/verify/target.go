package verify

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"reflect"
	"regexp"
	"strings"
)

// Target is what braid sink verify asks of a sink's target: rows of a
// logical table's target table, as text. It uses only the standard
// library's types, so a target package implements it without importing
// this one (sink/mysql's Target does; sink/sinkrun checks it by type
// assertion).
//
// A row is column name → value; nil is NULL. A value is the target's text
// of it, compared with the source's (MySQL's text protocol) by Equal,
// which forgives the differences of form a PostgreSQL target has:
// numbers are compared as numbers (1.50 = 1.5, 1e3 = 1000), t/true and
// f/false equal 1 and 0, a timestamp may have a T between date and time
// and trailing zeros in its fraction, JSON documents are compared by
// value, and \x-hex (bytea) equals the bytes it spells. Anything else
// must be printed as MySQL prints it: dates as YYYY-MM-DD, times and
// timestamps without a zone, in the zone the source's session shows
// them in (the server's), strings as their characters.
//
// Its methods are called on the sink's open target while the sink
// applies, so they must be safe for use at the same time as Apply, and
// only read.
type Target interface {
	// Lookup returns the row of logical's target table (logical is
	// "schema.table") whose columns keyCols hold key (NULL compared as
	// equal to NULL) and, when the sink has an origin column and origin
	// is not "", whose origin column holds origin ("source/schema.table");
	// found is false when there is no such row.
	Lookup(ctx context.Context, logical string, keyCols []string, key []*string, origin string) (row map[string]*string, found bool, err error)
	// Sample returns up to n rows of logical's target table drawn at
	// random, each with its origin column when the sink has one, without
	// reading the whole table where that can be helped.
	Sample(ctx context.Context, logical string, n int) ([]map[string]*string, error)
}

// Equal reports whether a source's value and a target's are the same,
// as Target's comment says.
func Equal(src, tgt *string) bool {
	switch {
	case src == nil || tgt == nil:
		return src == nil && tgt == nil
	case *src == *tgt:
		return true
	}
	a, b := *src, *tgt
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			return x.Cmp(y) == 0
		}
	}
	if boolean(a) != "" && boolean(a) == boolean(b) {
		return true
	}
	if timestamp.MatchString(a) && timestamp.MatchString(b) {
		return normalTime(a) == normalTime(b)
	}
	if jsonEqual(a, b) {
		return true
	}
	return hexEqual(a, b) || hexEqual(b, a)
}

var decimal = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// number parses a decimal or float's text.
func number(s string) (*big.Rat, bool) {
	if !decimal.MatchString(s) {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// boolean is "1" or "0" for a boolean's text, "" for other text.
func boolean(s string) string {
	switch strings.ToLower(s) {
	case "1", "t", "true":
		return "1"
	case "0", "f", "false":
		return "0"
	}
	return ""
}

var timestamp = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?$`)

// normalTime is a timestamp with a space between date and time and no
// trailing zeros in its fraction.
func normalTime(s string) string {
	s = strings.Replace(s, "T", " ", 1)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// jsonEqual reports whether a and b are JSON objects or arrays of equal
// value.
func jsonEqual(a, b string) bool {
	isDoc := func(s string) bool {
		s = strings.TrimSpace(s)
		return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
	}
	if !isDoc(a) || !isDoc(b) {
		return false
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// hexEqual reports whether h is \x and the hex of s's bytes.
func hexEqual(h, s string) bool {
	if !strings.HasPrefix(h, `\x`) {
		return false
	}
	b, err := hex.DecodeString(h[2:])
	return err == nil && bytes.Equal(b, []byte(s))
}
