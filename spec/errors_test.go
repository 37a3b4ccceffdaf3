package spec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/spec"
)

// TestParseOnePass: a spec with three different mistakes (a misspelt
// key, a value of the wrong form, a value Validate refuses) gets all three
// in one error, one per line, in line order, each with its line and YAML
// path; the misspelt key does not also give "address: missing".
func TestParseOnePass(t *testing.T) {
	_, err := spec.Parse([]byte(`name: shop
sources:
  - name: a
    address: 127.0.0.1:3307
  - name: b
    adress: 127.0.0.1:3308
heartbeat: 5 seconds
consumers:
  start: newest
`))
	want := `line 6: sources[1]: unknown key "adress" (did you mean "address"?)
line 7: heartbeat: "5 seconds" is not a duration: write e.g. 200ms, 1s, 5m or 1h30m
line 9: consumers.start: "newest": want earliest (the whole stream, the default) or latest (from now on)`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
	var fe *spec.FieldError
	if !errors.As(err, &fe) || fe.Line != 6 || fe.Path != "sources[1]" {
		t.Errorf("errors.As: %+v", fe)
	}
	// What braid destination create prints: the lines folded into one.
	t.Logf("braid destination create: shop.yaml: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
}

// TestUnknownKeys: an unknown key is named with the key it was probably
// meant to be, or the place it belongs, or the keys that may be written
// there.
func TestUnknownKeys(t *testing.T) {
	const src = "sources: [{name: a, address: 'h:1'}]\n"
	for _, c := range []struct{ yaml, want string }{
		{"name: d\nsorces: []\n", `line 2: unknown key "sorces" (did you mean "sources"?)`},
		{"name: d\n" + src + "maxClockSkew: 1s\n", `line 3: unknown key "maxClockSkew" (did you mean "max_clock_skew"?)`},
		{"name: d\n" + src + "max-clock-skew: 1s\n", `line 3: unknown key "max-clock-skew" (did you mean "max_clock_skew"?)`},
		{"name: d\nsources: [{name: a, address: 'h:1', serverid: 7}]\n", `line 2: sources[0]: unknown key "serverid" (did you mean "server_id"?)`},
		{"name: d\nsources: [{name: a, address: 'h:1', start: {fil: b.1}}]\n", `line 2: sources[0].start: unknown key "fil" (did you mean "file"?)`},
		{"name: d\n" + src + "start: earliest\n", `line 3: unknown key "start" here (did you mean sources[i].start or consumers.start?)`},
		{"name: d\n" + src + "consumers: {expire: 1h}\n", `line 3: consumers: unknown key "expire" (did you mean "expire_after"?)`},
		{"name: d\n" + src + "nonsense: 1\n", `line 3: unknown key "nonsense": the keys here are name, sources, tables, route, ordering, heartbeat, max_clock_skew, shard_ddl, ddl_lock_warn_after, online_ddl, shadow_table_rules, trash_table_rules, consumers, sinks, snapshot, snapshot_chunk_rows, snapshot_parallelism`},
		{"name: d\n" + src + "name: e\n", `line 3: name: given twice (first on line 1): keep one`},
	} {
		_, err := spec.Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.yaml, err, c.want)
		}
	}
}

// TestBadValues: a value of the wrong form says what it is and what to
// write instead, and never names a Go type.
func TestBadValues(t *testing.T) {
	goish := regexp.MustCompile(`spec\.|engine\.|uint32|int64|\bstring\b|struct|!!|unmarshal|reflect`)
	for _, c := range []struct{ yaml, want string }{
		{"name: d\nsources: [{name: a, address: 'h:1', server_id: abc}]\n", `line 2: sources[0].server_id: "abc": write a whole number from 0 to 4294967295`},
		{"name: d\nsources: [{name: a, address: 'h:1', server_id: '12'}]\n", `line 2: sources[0].server_id: "12": write a whole number from 0 to 4294967295, without quotes`},
		{"name: d\nsources: [{name: a, address: 'h:1', start: yesterday}]\n", `line 2: sources[0].start: "yesterday": want earliest, latest, {file: binlog.000002, pos: 4}, {gtid: "0-1-42"} or {timestamp: "2026-11-29T10:00:00Z"}`},
		{"name: d\nsources:\n  - name: a\n    address: 'h:1'\n    start:\n      timestamp: noon\n", `line 6: sources[0].start.timestamp: "noon" is not an RFC 3339 time: write e.g. 2026-11-29T10:00:00Z`},
		{"name: d\nsources:\n  - name: a\n    address: 'h:1'\n    start:\n      gtid: '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:shop'\n",
			`line 6: sources[0].start.gtid: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:shop" is not a MySQL GTID set (e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5, or with a tag 3e11fa47-71ca-11e1-9e33-c80aa9429562:shop:1-5): tag "shop" has no interval after it`},
		{"name: d\nsources: [{name: a, address: 'h:1', start: {gtid: 0-1}}]\n", `line 2: sources[0].start.gtid: "0-1" is neither a MariaDB GTID position (e.g. 0-1-42) nor a MySQL GTID set (e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5)`},
		{"name: d\nsources: [{name: a, address: 'h:1', start: {pos: 9}}]\n", `line 2: sources[0].start: pos without file: give both, e.g. {file: binlog.000002, pos: 4}`},
		{"name: d\nsources: [{name: a, address: 'h:1'}]\nheartbeat: 200\n", `line 3: heartbeat: "200" has no unit: write e.g. 200ms or 200s`},
		{"name: d\nsources: {name: a}\n", `line 2: sources: keys and values here: want a list, e.g. [{name: a, address: 127.0.0.1:3306}]`},
		{"name: d\nsources: [a]\n", `line 2: sources[0]: "a": want keys and values (key: value), e.g. {name: a, address: 127.0.0.1:3306}`},
		{"name: d\nsources: [{name: a, address: [h, 1]}]\n", "line 2: sources[0].address: item 1: \"h\" is not host:port: write host:port, e.g. 127.0.0.1:3306\nline 2: sources[0].address: item 2: \"1\" is not host:port: write host:port, e.g. 127.0.0.1:3306"},
		{"name: d\nsources: [{name: a, address: ['h:1', [x]]}]\n", `line 2: sources[0].address: item 2: a list here: want a single value, e.g. 127.0.0.1:3306`},
		{"name: d\nsources: [{name: a, address: []}]\n", `line 2: sources[0].address: an empty list: write one value or a list of them, e.g. [127.0.0.1:3306, 127.0.0.1:3307]`},
		{"name: d\nsources: [{name: a, address: ['h:1', 'h:2,h:3']}]\n", `line 2: sources[0].address: item 2: "h:2,h:3" holds a comma: write one value per item`},
		{"name: d\nsources: [{name: a, address: ['h:1', 'h:1']}]\n", `line 2: sources[0].address: item 2: "h:1" is listed twice (item 1 has it too): list each server once`},
		{"name: d\nsources: [{name: a, address: 'h:1,'}]\n", `line 2: sources[0].address: item 2: missing or empty: write host:port, e.g. 127.0.0.1:3306`},
		{"name: d\nsources: [{name: a, address: 'h:1', read_from: secondary}]\n", `line 2: sources[0].read_from: "secondary": want primary (a writable server, the default) or replica (a read_only one)`},
		{"name: d\nsources: [{name: a, address: 'h:1', failover_after: -1s}]\n", `line 2: sources[0].failover_after: -1s: must not be negative: leave it out for 10s, or write e.g. 30s`},
		{"name: d\nsources: [{name: a, address: 'h:1'}]\ntables: 'shop\\.orders'\n", `line 3: tables: "shop\\.orders": want a list (one '- item' per line, or [a, b])`},
		{"- name: d\n", `line 1: a list here: want keys and values (key: value), e.g. {name: shop, sources: [{name: a, address: 127.0.0.1:3306}]}`},
		{"name: d\nsources: [{name: a, address: \n", `line 2: invalid spec: not YAML or JSON: did not find expected node content; check the indentation, quotes and brackets there`},
		{"name: d\nsources:\n  - {name: a}\n", `line 3: sources[0].address: missing or empty: write host:port, e.g. 127.0.0.1:3306`},
		{"", "name: missing or empty: write e.g. name: shop\nsources: no sources: add at least one, e.g. sources: [{name: a, address: 127.0.0.1:3306}]"},
	} {
		_, err := spec.Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.yaml, err, c.want)
			continue
		}
		if m := goish.FindString(err.Error()); m != "" {
			t.Errorf("%q: the error names %q: %v", c.yaml, m, err)
		}
	}
}

// TestConsumers: the consumers: block, its defaults, its errors, and its
// round trips through YAML (Raft stores the spec so) and JSON (the API
// shows it so).
func TestConsumers(t *testing.T) {
	const base = "name: shop\nsources: [{name: a, address: '127.0.0.1:3306'}]\n"
	s, err := spec.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Consumers; c.Start != spec.StartEarliest || time.Duration(c.ExpireAfter) != spec.DefaultExpireAfter || c.MaxClientIDs != spec.DefaultMaxClientIDs || time.Duration(c.DetachAfter) != spec.DefaultDetachAfter {
		t.Errorf("defaults: %+v", c)
	}
	s, err = spec.Parse([]byte(base + "consumers:\n  start: latest\n  expire_after: 5s\n  detach_after: 1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := spec.Consumers{Start: spec.StartLatest, ExpireAfter: spec.Expiry(5 * time.Second), DetachAfter: spec.Duration(time.Minute), MaxClientIDs: spec.DefaultMaxClientIDs}
	if s.Consumers != want {
		t.Errorf("consumers %+v, want %+v", s.Consumers, want)
	}

	y, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := spec.Parse(y); err != nil || !reflect.DeepEqual(*back, *s) {
		t.Errorf("YAML round trip:\n%s\n%+v, %v", y, back, err)
	}
	j, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back spec.Spec
	if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(back, *s) {
		t.Errorf("JSON round trip:\n%s\n%+v, %v", j, back, err)
	}
	if j, _ := json.Marshal(spec.Spec{Name: "x"}); bytes.Contains(j, []byte("consumers")) {
		t.Errorf("a spec without consumers shows them: %s", j)
	}
	if y, _ := yaml.Marshal(spec.Spec{Name: "x"}); bytes.Contains(y, []byte("consumers")) {
		t.Errorf("a spec without consumers shows them: %s", y)
	}

	// never, or an explicit 0 (which meant never before expiry had a
	// default), keeps client ids; both survive a YAML round trip.
	for _, v := range []string{"never", "0", "0s"} {
		s, err := spec.Parse([]byte(base + "consumers: {expire_after: " + v + ", max_client_ids: 7}\n"))
		if err != nil || s.Consumers.ExpireAfter != spec.ExpireNever || s.Consumers.MaxClientIDs != 7 {
			t.Errorf("expire_after: %s: %+v, %v", v, s, err)
			continue
		}
		y, _ := yaml.Marshal(s)
		if back, err := spec.Parse(y); err != nil || back.Consumers.ExpireAfter != spec.ExpireNever {
			t.Errorf("expire_after: %s: YAML round trip:\n%s\n%v", v, y, err)
		}
	}

	_, err = spec.Parse([]byte(base + "consumers:\n  start: Newest\n  expire_after: -1s\n  detach_after: -2s\n  max_client_ids: -3\n"))
	wantErr := `line 4: consumers.start: "Newest": want earliest (the whole stream, the default) or latest (from now on)
line 5: consumers.expire_after: -1s: must not be negative: write never to keep client ids until dropped, or e.g. 24h (default 168h0m0s)
line 6: consumers.detach_after: -2s: must not be negative: leave it out for 10s, or write e.g. 1m
line 7: consumers.max_client_ids: -3: want 1 to 100000 (default 100)`
	if err == nil || err.Error() != wantErr {
		t.Errorf("bad consumers:\n%v\nwant:\n%s", err, wantErr)
	}
	_, err = spec.Parse([]byte(base + "consumers: {start: {file: b.1}, detach_after: soon}\n"))
	wantErr = `line 3: consumers.start: keys and values here: want a single value
line 3: consumers.detach_after: "soon" is not a duration: write e.g. 200ms, 1s, 5m or 1h30m`
	if err == nil || err.Error() != wantErr {
		t.Errorf("bad consumers:\n%v\nwant:\n%s", err, wantErr)
	}
	// Validate, on a spec built in Go, names the field without a line.
	bad := spec.Spec{Name: "shop", Sources: []spec.Source{{Name: "a", Address: "h:1"}}, Consumers: spec.Consumers{Start: "middle"}}
	if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), `consumers.start: "middle": want earliest`) {
		t.Errorf("Validate: %v", err)
	}
}

// TestParseJSON: a JSON spec (tabs and all) reads as its YAML twin, and
// its mistakes come with their lines.
func TestParseJSON(t *testing.T) {
	js := "{\n\t\"name\": \"shop\",\n\t\"sources\": [\n\t\t{\"name\": \"a\", \"address\": \"127.0.0.1:3306\", \"start\": {\"gtid\": \"0-1-5\"}}\n\t],\n\t\"consumers\": {\"start\": \"latest\", \"detach_after\": \"1m\"}\n}\n"
	got, err := spec.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	want, err := spec.Parse([]byte("name: shop\nsources:\n  - {name: a, address: '127.0.0.1:3306', start: {gtid: 0-1-5}}\nconsumers: {start: latest, detach_after: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON %+v\nYAML %+v", got, want)
	}
	bad := strings.Replace(strings.Replace(js, `"address"`, `"adress"`, 1), `"1m"`, `"1 minute"`, 1)
	_, err = spec.Parse([]byte(bad))
	wantErr := `line 4: sources[0]: unknown key "adress" (did you mean "address"?)
line 6: consumers.detach_after: "1 minute" is not a duration: write e.g. 200ms, 1s, 5m or 1h30m`
	if err == nil || err.Error() != wantErr {
		t.Errorf("bad JSON:\n%v\nwant:\n%s", err, wantErr)
	}
}

// TestParseAsBefore: a good spec reads exactly as yaml.v3's own strict
// decoding read it before Parse walked the document itself: anchors,
// merge keys, flow and block forms, every start form.
func TestParseAsBefore(t *testing.T) {
	text := `name: shop
sources:
  - &a
    name: a
    address: 127.0.0.1:3307
    user: braid
    password_env: SHOP_PW
    start: {file: binlog.000002, pos: 120}
  - <<: *a
    name: b
    server_id: 0x10
    start: Earliest
  - {name: c, address: "[::1]:3309", start: {gtid: "0-1-42"}}
  - {name: d, address: 'h:1', start: {timestamp: "2026-11-29T10:00:00.5Z"}, user: ~}
  - {name: e, address: 'h:2', start: ""}
tables: ['shop_\d+\.orders', "shop_\\d+\\.items"]
route:
  - match: 'shop_\d+\.(\w+)'
    to: 'shop.$1'
ordering: per-source
heartbeat: 150ms
max_clock_skew: 2s
`
	got, err := spec.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	var old spec.Spec
	if err := dec.Decode(&old); err != nil {
		t.Fatal(err)
	}
	old = old.WithDefaults()
	if !reflect.DeepEqual(*got, old) {
		t.Errorf("Parse:\n%+v\nyaml.v3:\n%+v", *got, old)
	}
	if b := got.Sources[1]; b.Address != "127.0.0.1:3307" || b.User != "braid" || b.ServerID != 16 || b.Start.Kind != spec.StartEarliest {
		t.Errorf("merged source b: %+v", b)
	}
}

// TestManyProblems: a spec of many broken sources lists the first ones
// and counts the rest, and an alias bomb is cut short.
func TestManyProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: shop\nsources:\n")
	for i := range 30 {
		fmt.Fprintf(&b, "  - {name: s%d}\n", i)
	}
	_, err := spec.Parse([]byte(b.String()))
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != 21 || lines[20] != "and 10 more problems: fix these first" || !strings.HasPrefix(lines[0], "line 3: sources[0].address: missing") {
		t.Errorf("%d lines: %v", len(lines), err)
	}

	// Merge keys that would expand to 10^11 keys are resolved once each.
	b.Reset()
	b.WriteString("name: shop\nsources:\n  - &a0 {name: a, address: 'h:1'}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&b, "  - &a%d {<<: [%s], name: s%d}\n", i, strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9)+fmt.Sprintf("*a%d", i-1), i)
	}
	start := time.Now()
	s, err := spec.Parse([]byte(b.String()))
	if err != nil || len(s.Sources) != 12 || s.Sources[11].Address != "h:1" || time.Since(start) > 2*time.Second {
		t.Errorf("merge keys: %v after %v", err, time.Since(start))
	}
}

// TestAddressList: a source's address takes one host:port or a list,
// block or flow, kept joined with commas; the spec's YAML
// form (Raft stores it) parses back to it, and failover_after and read_from have their
// defaults. The old decoder refused a list (a list here: want a single
// value).
func TestAddressList(t *testing.T) {
	text := `name: shop
sources:
  - name: a
    address:
      - 127.0.0.1:3306
      - db2:3306
      - "[::1]:3307"
    failover_after: 30s
    read_from: replica
  - {name: b, address: [h:1, h:2]}
  - {name: c, address: 'h:3'}
`
	s, err := spec.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := s.Sources[0], s.Sources[1], s.Sources[2]
	if a.Address != "127.0.0.1:3306,db2:3306,[::1]:3307" || !slices.Equal(a.Addresses(), []string{"127.0.0.1:3306", "db2:3306", "[::1]:3307"}) {
		t.Errorf("a: address %q, addresses %q", a.Address, a.Addresses())
	}
	if a.FailoverAfterOrDefault() != 30*time.Second || !a.ReadFrom.Replica() {
		t.Errorf("a: failover_after %v, read_from %q", a.FailoverAfterOrDefault(), a.ReadFrom)
	}
	if !slices.Equal(b.Addresses(), []string{"h:1", "h:2"}) || b.FailoverAfterOrDefault() != spec.DefaultFailoverAfter || b.ReadFrom.Replica() {
		t.Errorf("b: addresses %q, failover_after %v, read_from %q", b.Addresses(), b.FailoverAfterOrDefault(), b.ReadFrom)
	}
	if !slices.Equal(c.Addresses(), []string{"h:3"}) {
		t.Errorf("c: addresses %q", c.Addresses())
	}
	y, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := spec.Parse(y)
	if err != nil {
		t.Fatalf("%s: %v", y, err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("%s parses to\n%+v\nwant\n%+v", y, back, s)
	}
}
