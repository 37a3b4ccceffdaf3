package mysqlbinlog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// JSONBinary is a value already in MySQL's binary JSON format (type byte
// then value), written as is.
type JSONBinary []byte

// Binary JSON type bytes (sql-common/json_binary.h).
const (
	jsonbSmallObject = 0x00
	jsonbLargeObject = 0x01
	jsonbSmallArray  = 0x02
	jsonbLargeArray  = 0x03
	jsonbLiteral     = 0x04
	jsonbInt16       = 0x05
	jsonbUint16      = 0x06
	jsonbInt32       = 0x07
	jsonbUint32      = 0x08
	jsonbInt64       = 0x09
	jsonbUint64      = 0x0a
	jsonbDouble      = 0x0b
	jsonbString      = 0x0c

	jsonbLiteralNull  = 0x00
	jsonbLiteralTrue  = 0x01
	jsonbLiteralFalse = 0x02
)

// jsonNode is a parsed JSON value that keeps what MySQL keeps: integers
// apart from doubles, object members by key.
type jsonNode struct {
	kind    byte // one of the jsonb type bytes (objects and arrays as small)
	literal byte
	i       int64
	u       uint64
	f       float64
	s       string
	keys    []string
	values  []*jsonNode
}

// EncodeJSON returns the binary JSON MySQL stores for the JSON text s.
func EncodeJSON(s string) ([]byte, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	n, err := parseJSON(dec)
	if err != nil {
		return nil, fmt.Errorf("JSON text %.40q: %w", s, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("JSON text %.40q has more than one value", s)
	}
	return encodeJSONNode(n), nil
}

func parseJSON(dec *json.Decoder) (*jsonNode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &jsonNode{kind: jsonbSmallObject}
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := kt.(string)
				v, err := parseJSON(dec)
				if err != nil {
					return nil, err
				}
				// MySQL keeps the last of duplicate keys (8.0.3+).
				if i, dup := index[key]; dup {
					n.values[i] = v
					continue
				}
				index[key] = len(n.keys)
				n.keys = append(n.keys, key)
				n.values = append(n.values, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '[':
			n := &jsonNode{kind: jsonbSmallArray}
			for dec.More() {
				v, err := parseJSON(dec)
				if err != nil {
					return nil, err
				}
				n.values = append(n.values, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
	case nil:
		return &jsonNode{kind: jsonbLiteral, literal: jsonbLiteralNull}, nil
	case bool:
		if t {
			return &jsonNode{kind: jsonbLiteral, literal: jsonbLiteralTrue}, nil
		}
		return &jsonNode{kind: jsonbLiteral, literal: jsonbLiteralFalse}, nil
	case string:
		return &jsonNode{kind: jsonbString, s: t}, nil
	case json.Number:
		return numberNode(string(t))
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// numberNode types a number as MySQL's parser does: an integer that fits
// int64 is signed, a larger one unsigned, anything else a double; the
// integer is then stored in the smallest binary type that holds it.
func numberNode(s string) (*jsonNode, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			switch {
			case i >= math.MinInt16 && i <= math.MaxInt16:
				return &jsonNode{kind: jsonbInt16, i: i}, nil
			case i >= math.MinInt32 && i <= math.MaxInt32:
				return &jsonNode{kind: jsonbInt32, i: i}, nil
			}
			return &jsonNode{kind: jsonbInt64, i: i}, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return &jsonNode{kind: jsonbUint64, u: u}, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s is out of range", s)
	}
	return &jsonNode{kind: jsonbDouble, f: f}, nil
}

func encodeJSONNode(n *jsonNode) []byte {
	typ, body := encodeJSONValue(n)
	return append([]byte{typ}, body...)
}

// encodeJSONValue returns the type byte and the value bytes of n.
func encodeJSONValue(n *jsonNode) (byte, []byte) {
	switch n.kind {
	case jsonbSmallObject, jsonbSmallArray:
		if b, ok := encodeContainer(n, false); ok {
			return n.kind, b
		}
		b, _ := encodeContainer(n, true)
		return n.kind + 1, b
	case jsonbLiteral:
		return jsonbLiteral, []byte{n.literal}
	case jsonbInt16:
		return jsonbInt16, binary.LittleEndian.AppendUint16(nil, uint16(n.i))
	case jsonbInt32:
		return jsonbInt32, binary.LittleEndian.AppendUint32(nil, uint32(n.i))
	case jsonbInt64:
		return jsonbInt64, binary.LittleEndian.AppendUint64(nil, uint64(n.i))
	case jsonbUint64:
		return jsonbUint64, binary.LittleEndian.AppendUint64(nil, n.u)
	case jsonbDouble:
		return jsonbDouble, binary.LittleEndian.AppendUint64(nil, math.Float64bits(n.f))
	case jsonbString:
		return jsonbString, append(appendJSONLength(nil, len(n.s)), n.s...)
	}
	panic(fmt.Sprintf("mysqlbinlog: json node kind %d", n.kind))
}

// appendJSONLength writes a string length 7 bits a byte, low bits first,
// the high bit marking that more follow.
func appendJSONLength(b []byte, n int) []byte {
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// inlined reports whether the value of n sits in its value entry rather
// than after the entries: literals and 16-bit integers always, 32-bit
// integers in the large format.
func inlined(n *jsonNode, large bool) bool {
	switch n.kind {
	case jsonbLiteral, jsonbInt16, jsonbUint16:
		return true
	case jsonbInt32, jsonbUint32:
		return large
	}
	return false
}

// encodeContainer writes an object or array without its type byte:
// element count, total size, key entries (objects), value entries, keys,
// then values. Offsets count from the element count. ok is false when
// the small format's 16-bit offsets cannot hold it.
func encodeContainer(n *jsonNode, large bool) ([]byte, bool) {
	offSize := 2
	if large {
		offSize = 4
	}
	putOff := func(b []byte, v int) []byte {
		if large {
			return binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	keys := n.keys
	values := n.values
	isObject := n.kind == jsonbSmallObject
	if isObject {
		// MySQL orders members by key length, then by key bytes.
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool {
			ka, kb := keys[order[a]], keys[order[b]]
			if len(ka) != len(kb) {
				return len(ka) < len(kb)
			}
			return ka < kb
		})
		sortedKeys := make([]string, len(keys))
		sortedValues := make([]*jsonNode, len(keys))
		for i, o := range order {
			sortedKeys[i], sortedValues[i] = keys[o], values[o]
		}
		keys, values = sortedKeys, sortedValues
	}
	count := len(values)
	header := 2 * offSize
	keyEntries := 0
	if isObject {
		keyEntries = count * (offSize + 2)
	}
	valueEntries := count * (1 + offSize)
	pos := header + keyEntries + valueEntries
	var keyBytes []byte
	keyOffsets := make([]int, len(keys))
	for i, k := range keys {
		if len(k) > math.MaxUint16 {
			return nil, false
		}
		keyOffsets[i] = pos + len(keyBytes)
		keyBytes = append(keyBytes, k...)
	}
	pos += len(keyBytes)
	var valueBytes []byte
	entries := make([]byte, 0, valueEntries)
	for _, v := range values {
		if inlined(v, large) {
			_, body := encodeJSONValue(v)
			entries = append(entries, v.kind)
			var slot [4]byte
			copy(slot[:], body)
			entries = append(entries, slot[:offSize]...)
			continue
		}
		typ, body := encodeJSONValue(v)
		entries = append(entries, typ)
		entries = putOff(entries, pos+len(valueBytes))
		valueBytes = append(valueBytes, body...)
	}
	total := pos + len(valueBytes)
	if !large && total > math.MaxUint16 {
		return nil, false
	}
	out := putOff(nil, count)
	out = putOff(out, total)
	for i, k := range keys {
		out = putOff(out, keyOffsets[i])
		out = binary.LittleEndian.AppendUint16(out, uint16(len(k)))
	}
	out = append(out, entries...)
	out = append(out, keyBytes...)
	return append(out, valueBytes...), true
}

// JSONDiffOp is the operation of one partial JSON update.
type JSONDiffOp byte

// The operations of Json_diff (sql/json_diff.h).
const (
	JSONReplace JSONDiffOp = iota
	JSONInsert
	JSONRemove
)

// JSONDiff is one change of a partial JSON update: JSON_SET / JSON_REPLACE
// (Replace), JSON_ARRAY_INSERT / JSON_INSERT (Insert) or JSON_REMOVE
// (Remove) at Path ("$.a[1]"), with Value as JSON text.
type JSONDiff struct {
	Op    JSONDiffOp
	Path  string
	Value string
}

// JSONDiffs is the after image of a JSON column in a PARTIAL_UPDATE_ROWS
// event: the changes to apply to the before image, in order.
type JSONDiffs []JSONDiff

// encode writes Json_diff_vector::write_binary's body (without the
// 4-byte length): per diff the operation, the path, and for Replace and
// Insert the value in binary JSON, each with a packed length.
func (d JSONDiffs) encode() ([]byte, error) {
	var b []byte
	for _, diff := range d {
		if diff.Op > JSONRemove {
			return nil, fmt.Errorf("JSON diff operation %d is not replace, insert or remove", diff.Op)
		}
		b = append(b, byte(diff.Op))
		b = appendPackedInt(b, uint64(len(diff.Path)))
		b = append(b, diff.Path...)
		if diff.Op == JSONRemove {
			continue
		}
		v, err := EncodeJSON(diff.Value)
		if err != nil {
			return nil, err
		}
		b = appendPackedInt(b, uint64(len(v)))
		b = append(b, v...)
	}
	if bytes.Equal(b, nil) {
		return nil, errors.New("a partial JSON update needs at least one diff")
	}
	return b, nil
}
