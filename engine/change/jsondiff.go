package change

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// With binlog_row_value_options=PARTIAL_JSON, MySQL logs an UPDATE that
// changes a JSON column with JSON_SET, JSON_REPLACE or JSON_REMOVE as a
// PARTIAL_UPDATE_ROWS event whose after image holds, for that column, a
// list of diffs (Json_diff_vector::write_binary: an operation, a path, and
// for replace and insert a binary JSON value) to apply to the before
// image. braid applies them (ApplyJSONDiffs), so every reader gets the
// whole after image, as from a full UPDATE.

// JSON diff operations (sql/json_diff.h).
const (
	jsonDiffReplace = 0
	jsonDiffInsert  = 1
	jsonDiffRemove  = 2
)

// jsonNode is a binary JSON value as a tree, to apply diffs to: an object
// (keys sorted as MySQL stores them) or array with its children, or a
// scalar's type and its bytes as stored out of line (an inlined
// literal or 16-bit integer widened to its own 1 or 2 bytes).
type jsonNode struct {
	tp     byte
	keys   [][]byte
	kids   []*jsonNode
	scalar []byte
}

func (n *jsonNode) object() bool { return n.tp == jsonSmallObject || n.tp == jsonLargeObject }
func (n *jsonNode) array() bool  { return n.tp == jsonSmallArray || n.tp == jsonLargeArray }

// parseJSONDoc parses a binary JSON document (type byte and value).
func parseJSONDoc(doc []byte) (*jsonNode, error) {
	if len(doc) == 0 {
		return &jsonNode{tp: jsonLiteral, scalar: []byte{jsonNull}}, nil
	}
	return parseJSONNode(doc[0], doc[1:], 0)
}

// parseJSONNode parses the value of type tp at data.
func parseJSONNode(tp byte, data []byte, depth int) (*jsonNode, error) {
	switch tp {
	case jsonSmallObject, jsonLargeObject, jsonSmallArray, jsonLargeArray:
		if depth > maxJSONDepth {
			return nil, errors.New("binary JSON nested too deep")
		}
		return parseJSONContainer(tp, data, depth+1)
	case jsonLiteral:
		return jsonScalar(tp, data, 1)
	case jsonInt16, jsonUint16:
		return jsonScalar(tp, data, 2)
	case jsonInt32, jsonUint32:
		return jsonScalar(tp, data, 4)
	case jsonInt64, jsonUint64, jsonDouble:
		return jsonScalar(tp, data, 8)
	case jsonString:
		_, n, err := jsonVarBytes(data)
		if err != nil {
			return nil, err
		}
		return jsonScalar(tp, data, n)
	case jsonOpaque:
		if len(data) < 1 {
			return nil, errJSONTruncated
		}
		_, n, err := jsonVarBytes(data[1:])
		if err != nil {
			return nil, err
		}
		return jsonScalar(tp, data, 1+n)
	}
	return nil, fmt.Errorf("binary JSON value type %#x", tp)
}

func jsonScalar(tp byte, data []byte, n int) (*jsonNode, error) {
	if len(data) < n {
		return nil, errJSONTruncated
	}
	return &jsonNode{tp: tp, scalar: data[:n]}, nil
}

func parseJSONContainer(tp byte, data []byte, depth int) (*jsonNode, error) {
	large := tp == jsonLargeObject || tp == jsonLargeArray
	n := &jsonNode{tp: tp}
	os := 2
	if large {
		os = 4
	}
	if len(data) < 2*os {
		return nil, errJSONTruncated
	}
	count, size := jsonUint(data, os), jsonUint(data[os:], os)
	if size > len(data) {
		return nil, errJSONTruncated
	}
	data = data[:size]
	valueEntries := 2 * os
	if n.object() {
		valueEntries += count * (os + 2)
	}
	if valueEntries+count*(1+os) > size {
		return nil, errJSONTruncated
	}
	for i := range count {
		if n.object() {
			e := 2*os + i*(os+2)
			off, kn := jsonUint(data[e:], os), int(binary.LittleEndian.Uint16(data[e+os:]))
			if off+kn > size {
				return nil, errJSONTruncated
			}
			n.keys = append(n.keys, data[off:off+kn])
		}
		e := valueEntries + i*(1+os)
		vt := data[e]
		var kid *jsonNode
		var err error
		if jsonInlined(vt, large) {
			kid, err = parseJSONNode(vt, data[e+1:e+1+os], depth)
		} else {
			off := jsonUint(data[e+1:], os)
			if off >= size {
				return nil, errJSONTruncated
			}
			kid, err = parseJSONNode(vt, data[off:], depth)
		}
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, kid)
	}
	return n, nil
}

// encode appends n's binary document (type byte and value).
func (n *jsonNode) encodeDoc(b []byte) ([]byte, error) {
	tp, v, err := n.encode()
	if err != nil {
		return b, err
	}
	b = append(b, tp)
	return append(b, v...), nil
}

// encode returns n's type and stored value; a container in the small
// form when it fits, else the large one.
func (n *jsonNode) encode() (byte, []byte, error) {
	if !n.object() && !n.array() {
		return n.tp, n.scalar, nil
	}
	if v, ok, err := n.encodeContainer(false); err != nil || ok {
		tp := byte(jsonSmallObject)
		if n.array() {
			tp = jsonSmallArray
		}
		return tp, v, err
	}
	v, ok, err := n.encodeContainer(true)
	if err == nil && !ok {
		err = errors.New("JSON value too large")
	}
	tp := byte(jsonLargeObject)
	if n.array() {
		tp = jsonLargeArray
	}
	return tp, v, err
}

// encodeContainer encodes an object or array in the small or large form;
// ok is false when it does not fit in the form.
func (n *jsonNode) encodeContainer(large bool) ([]byte, bool, error) {
	os, limit := 2, uint64(0xffff)
	if large {
		os, limit = 4, 0xffffffff
	}
	count := len(n.kids)
	header := 2 * os
	if n.object() {
		header += count * (os + 2)
	}
	header += count * (1 + os)
	out := make([]byte, header, header+16*count)
	put := func(at int, v uint64) bool {
		if v > limit {
			return false
		}
		if os == 2 {
			binary.LittleEndian.PutUint16(out[at:], uint16(v))
		} else {
			binary.LittleEndian.PutUint32(out[at:], uint32(v))
		}
		return true
	}
	put(0, uint64(count))
	if n.object() {
		for i, k := range n.keys {
			e := 2*os + i*(os+2)
			if len(k) > 0xffff || !put(e, uint64(len(out))) {
				return nil, false, nil
			}
			binary.LittleEndian.PutUint16(out[e+os:], uint16(len(k)))
			out = append(out, k...)
		}
	}
	valueEntries := 2 * os
	if n.object() {
		valueEntries += count * (os + 2)
	}
	for i, kid := range n.kids {
		e := valueEntries + i*(1+os)
		if jsonInlined(kid.tp, large) {
			out[e] = kid.tp
			copy(out[e+1:e+1+os], kid.scalar)
			continue
		}
		tp, v, err := kid.encode()
		if err != nil {
			return nil, false, err
		}
		out[e] = tp
		if !put(e+1, uint64(len(out))) {
			return nil, false, nil
		}
		out = append(out, v...)
	}
	if !put(os, uint64(len(out))) {
		return nil, false, nil
	}
	return out, true, nil
}

// jsonPathLeg is one step of a JSON path: an object member or an array
// index.
type jsonPathLeg struct {
	member []byte
	index  int // -1 for a member
}

// parseJSONPath parses a path as MySQL writes it in a diff
// (Json_path::to_string): "$", then ".name" (".\"quoted name\"" when not
// an identifier) and "[n]" legs.
func parseJSONPath(p string) ([]jsonPathLeg, error) {
	if len(p) == 0 || p[0] != '$' {
		return nil, fmt.Errorf("JSON path %q does not start with $", p)
	}
	var legs []jsonPathLeg
	for i := 1; i < len(p); {
		switch p[i] {
		case '.':
			i++
			if i < len(p) && p[i] == '"' {
				name, n, err := unquoteJSONKey(p[i:])
				if err != nil {
					return nil, fmt.Errorf("JSON path %q: %v", p, err)
				}
				legs = append(legs, jsonPathLeg{member: name, index: -1})
				i += n
				continue
			}
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("JSON path %q: empty member name", p)
			}
			legs = append(legs, jsonPathLeg{member: []byte(p[i:j]), index: -1})
			i = j
		case '[':
			j := i + 1
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j == len(p) {
				return nil, fmt.Errorf("JSON path %q: unclosed [", p)
			}
			idx, err := strconv.Atoi(p[i+1 : j])
			if err != nil || idx < 0 {
				return nil, fmt.Errorf("JSON path %q: array index %q", p, p[i+1:j])
			}
			legs = append(legs, jsonPathLeg{index: idx})
			i = j + 1
		default:
			return nil, fmt.Errorf("JSON path %q: unexpected %q", p, p[i])
		}
	}
	return legs, nil
}

// unquoteJSONKey reads a double-quoted member name at the start of s, with
// JSON escapes; it returns the name and the bytes read.
func unquoteJSONKey(s string) ([]byte, int, error) {
	var out []byte
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return out, i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return nil, 0, errors.New("unfinished escape")
			}
			i++
			switch s[i] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				if i+4 >= len(s) {
					return nil, 0, errors.New("unfinished \\u escape")
				}
				r, err := strconv.ParseUint(s[i+1:i+5], 16, 32)
				if err != nil {
					return nil, 0, err
				}
				out = append(out, string(rune(r))...)
				i += 4
			default:
				out = append(out, s[i])
			}
		default:
			out = append(out, c)
		}
	}
	return nil, 0, errors.New("unclosed quoted member name")
}

// jsonKeyLess is MySQL's order of an object's keys: shorter first, then
// by bytes.
func jsonKeyLess(a, b []byte) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return bytes.Compare(a, b) < 0
}

// applyJSONDiff applies one diff to the document root and returns the new
// root.
func applyJSONDiff(root *jsonNode, op byte, legs []jsonPathLeg, value *jsonNode) (*jsonNode, error) {
	if len(legs) == 0 {
		if op == jsonDiffReplace {
			return value, nil
		}
		return nil, errors.New("a JSON diff inserts or removes the whole document")
	}
	parent := root
	for _, leg := range legs[:len(legs)-1] {
		next, _ := parent.child(leg)
		if next == nil {
			return nil, errors.New("a JSON diff's path is not in the before image")
		}
		parent = next
	}
	last := legs[len(legs)-1]
	_, at := parent.child(last)
	switch {
	case op == jsonDiffReplace && at >= 0:
		parent.kids[at] = value
	case op == jsonDiffRemove && at >= 0:
		parent.kids = slices.Delete(parent.kids, at, at+1)
		if parent.object() {
			parent.keys = slices.Delete(parent.keys, at, at+1)
		}
	case op == jsonDiffInsert && parent.array() && last.index >= 0:
		parent.kids = slices.Insert(parent.kids, min(last.index, len(parent.kids)), value)
	case op == jsonDiffInsert && parent.object() && last.index < 0 && at < 0:
		i := 0
		for i < len(parent.keys) && jsonKeyLess(parent.keys[i], last.member) {
			i++
		}
		parent.keys = slices.Insert(parent.keys, i, last.member)
		parent.kids = slices.Insert(parent.kids, i, value)
	default:
		return nil, fmt.Errorf("JSON diff operation %d does not fit the before image", op)
	}
	return root, nil
}

// child finds the child leg names: it and its index, or nil and -1.
func (n *jsonNode) child(leg jsonPathLeg) (*jsonNode, int) {
	switch {
	case leg.index >= 0 && n.array() && leg.index < len(n.kids):
		return n.kids[leg.index], leg.index
	case leg.index < 0 && n.object():
		for i, k := range n.keys {
			if bytes.Equal(k, leg.member) {
				return n.kids[i], i
			}
		}
	}
	return nil, -1
}

// ApplyJSONDiffs applies a partial JSON column value, diffs (the bytes
// after the value's length), to before, the column's binary JSON in the
// before image, and returns the after image's binary JSON.
func ApplyJSONDiffs(before, diffs []byte) ([]byte, error) {
	root, err := parseJSONDoc(before)
	if err != nil {
		return nil, fmt.Errorf("before image: %w", err)
	}
	for len(diffs) > 0 {
		op := diffs[0]
		if op > jsonDiffRemove {
			return nil, fmt.Errorf("JSON diff operation %d", op)
		}
		pathLen, _, n := mysql.LengthEncodedInt(diffs[1:])
		at := 1 + n
		if n == 0 || uint64(len(diffs)-at) < pathLen {
			return nil, errJSONTruncated
		}
		path := string(diffs[at : at+int(pathLen)])
		at += int(pathLen)
		legs, err := parseJSONPath(path)
		if err != nil {
			return nil, err
		}
		var value *jsonNode
		if op != jsonDiffRemove {
			valueLen, _, n := mysql.LengthEncodedInt(diffs[at:])
			at += n
			if n == 0 || uint64(len(diffs)-at) < valueLen {
				return nil, errJSONTruncated
			}
			if value, err = parseJSONDoc(diffs[at : at+int(valueLen)]); err != nil {
				return nil, fmt.Errorf("JSON diff at %s: %w", path, err)
			}
			at += int(valueLen)
		}
		if root, err = applyJSONDiff(root, op, legs, value); err != nil {
			return nil, fmt.Errorf("JSON diff at %s: %w", path, err)
		}
		diffs = diffs[at:]
	}
	return root.encodeDoc(nil)
}
