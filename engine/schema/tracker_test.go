package schema_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// TestSchemaDatadriven runs the scripts in testdata/, one subtest per file,
// each with a tracker of its own; every case says why it matters.
// Regenerate the expected output with -rewrite and read the diff.
//
// Positions are binlog.000001 offsets unless written file:offset; output
// writes them the same way ("start" is the zero position). db= is the
// default database of the statement (default "db"; "db=" is none). Tables
// are named schema.table.
//
//	reset                          a new Tracker
//	charsets server=latin1 dbs=(db:latin1, u:utf8mb4)
//	                               SetCharsets
//	load pos=100 [db=db]           LoadCreate of the input; prints the table
//	ddl pos=200 [db=db]            ApplyDDL of the input; prints "databases
//	                               changed" when DatabasesChanged(pos), then
//	                               each table it reports changed, in its
//	                               order, as it is now, then "kept db.t" for
//	                               each table Kept(pos) names; "no change"
//	                               if none
//	table db.t [db.u...] [at=150]  Table, or TableAt at a position
//	columns db.t                   every field of every column of Table
//	unknown db.t until=300         MarkUnknownUntil; the live table is the
//	                               input's CREATE TABLE (empty: no table)
//	forget db.t                    Forget
//	compact pos=350                Compact
//	snapshot                       prints Snapshot
//	restore                        replaces the tracker with Restore of its
//	                               snapshot through JSON and prints what the
//	                               round trip changed (nothing, it should);
//	                               with input, restores that JSON instead
//	ddl-tables [db=db]             DDLTables of the input
//	truncated [db=db]              TruncatedTable of the input
//
// A table prints as "db.t: col rawtype [key] [null] [charset=cs], ...",
// then indented lines for its default charset and its PRIMARY and UNIQUE
// indexes; or "db.t: absent", "db.t: unknown" (exists, columns unknown),
// "db.t: unknown until 300" (MarkUnknownUntil pending). Errors print as
// "error (ErrDDLParse): text", naming the sentinel they wrap. Each table
// printed is checked against the snapshot's version in force, so Table,
// TableAt, Unknown and Snapshot must agree.
func TestSchemaDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{s: schema.NewTracker()}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

// harness holds one script's tracker.
type harness struct {
	s *schema.Tracker
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "reset":
		checkArgs(t, d)
		h.s = schema.NewTracker()
		return ""
	case "charsets":
		checkArgs(t, d, "server", "dbs")
		var server string
		d.ScanArgs(t, "server", &server)
		dbs := map[string]string{}
		for _, arg := range d.CmdArgs {
			if arg.Key != "dbs" {
				continue
			}
			for _, v := range arg.Vals {
				if v == "" {
					continue
				}
				name, cs, ok := strings.Cut(v, ":")
				if !ok {
					d.Fatalf(t, "dbs: %q is not db:charset", v)
				}
				dbs[name] = cs
			}
		}
		h.s.SetCharsets(server, dbs)
		return ""
	case "load":
		checkArgs(t, d, "pos", "db")
		db := dbArg(t, d)
		if err := h.s.LoadCreate(posArg(t, d, "pos"), db, d.Input); err != nil {
			return errText(err)
		}
		schemaName, name := createdTable(t, d, db)
		return h.state(t, schemaName, name, nil)
	case "ddl":
		checkArgs(t, d, "pos", "db")
		pos := posArg(t, d, "pos")
		changed, err := h.s.ApplyDDL(pos, dbArg(t, d), d.Input, 0)
		if err != nil {
			return errText(err)
		}
		var out []string
		if h.s.DatabasesChanged(pos) {
			out = append(out, "databases changed")
		}
		for _, full := range changed {
			schemaName, name, _ := strings.Cut(full, ".")
			out = append(out, h.state(t, schemaName, name, nil))
		}
		for _, full := range h.s.Kept(pos) {
			out = append(out, "kept "+full)
		}
		if len(out) == 0 {
			return "no change"
		}
		return strings.Join(out, "\n")
	case "table":
		checkArgs(t, d, "at")
		var at *change.Position
		if d.HasArg("at") {
			p := posArg(t, d, "at")
			at = &p
		}
		var out []string
		for _, n := range tableArgs(t, d) {
			out = append(out, h.state(t, n[0], n[1], at))
		}
		return strings.Join(out, "\n")
	case "columns":
		checkArgs(t, d)
		var out []string
		for _, n := range tableArgs(t, d) {
			tbl, ok := h.s.Table(n[0], n[1])
			if !ok {
				out = append(out, h.state(t, n[0], n[1], nil))
				continue
			}
			out = append(out, tbl.FullName()+":")
			for _, c := range tbl.Columns {
				out = append(out, "  "+columnFull(t, c))
			}
		}
		return strings.Join(out, "\n")
	case "unknown":
		checkArgs(t, d, "until")
		n := oneTable(t, d)
		var live *change.Table
		if d.Input != "" {
			scratch := schema.NewTracker()
			if err := scratch.LoadCreate(change.Position{}, n[0], d.Input); err != nil {
				d.Fatalf(t, "live table: %v", err)
			}
			schemaName, name := createdTable(t, d, n[0])
			live, _ = scratch.Table(schemaName, name)
		}
		h.s.MarkUnknownUntil(n[0], n[1], posArg(t, d, "until"), live)
		return h.state(t, n[0], n[1], nil)
	case "forget":
		checkArgs(t, d)
		n := oneTable(t, d)
		h.s.Forget(n[0], n[1])
		return ""
	case "compact":
		checkArgs(t, d, "pos")
		h.s.Compact(posArg(t, d, "pos"))
		return ""
	case "snapshot":
		checkArgs(t, d)
		return snapshotText(h.s.Snapshot())
	case "restore":
		checkArgs(t, d)
		if d.Input != "" {
			var snap change.SchemaSnapshot
			dec := json.NewDecoder(strings.NewReader(d.Input))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&snap); err != nil {
				d.Fatalf(t, "snapshot JSON: %v", err)
			}
			r, err := schema.Restore(snap)
			if err != nil {
				return errText(err)
			}
			h.s = r
			return ""
		}
		return h.roundTrip(t)
	case "ddl-tables":
		checkArgs(t, d, "db")
		touches, err := schema.DDLTables(dbArg(t, d), d.Input, 0)
		if err != nil {
			return errText(err)
		}
		var out []string
		for _, tc := range touches {
			s := tc.Table
			if tc.Creates {
				s += " creates"
			}
			if tc.Drops {
				s += " drops"
			}
			if tc.Database {
				s += " database"
			}
			out = append(out, s)
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	case "truncated":
		checkArgs(t, d, "db")
		if table, ok := schema.TruncatedTable(dbArg(t, d), d.Input, 0); ok {
			return table
		}
		return "none"
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

// roundTrip restores the tracker's snapshot through JSON into a new
// tracker, which takes the old one's place, and reports every way the new
// one answers differently.
func (h *harness) roundTrip(t *testing.T) string {
	t.Helper()
	snap := h.s.Snapshot()
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back change.SchemaSnapshot
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	var out []string
	if !reflect.DeepEqual(back, snap) {
		out = append(out, "JSON round trip differs:\n"+snapshotText(back))
	}
	r, err := schema.Restore(back)
	if err != nil {
		return strings.Join(append(out, errText(err)), "\n")
	}
	if again := r.Snapshot(); !reflect.DeepEqual(again, snap) {
		out = append(out, "restored snapshot differs:\n"+snapshotText(again))
	}
	for _, th := range snap.Tables {
		for _, v := range th.Versions {
			a, _ := h.s.TableAt(th.Schema, th.Name, v.Pos)
			b, _ := r.TableAt(th.Schema, th.Name, v.Pos)
			if !reflect.DeepEqual(a, b) {
				out = append(out, fmt.Sprintf("%s.%s at %s differs", th.Schema, th.Name, fmtPos(v.Pos)))
			}
		}
		a, _ := h.s.Unknown(th.Schema, th.Name)
		b, _ := r.Unknown(th.Schema, th.Name)
		if a != b {
			out = append(out, fmt.Sprintf("%s.%s unknown until %s, restored %s", th.Schema, th.Name, fmtPos(a), fmtPos(b)))
		}
	}
	h.s = r
	return strings.Join(out, "\n")
}

// state renders schema.name as Table (at == nil) or TableAt gives it,
// checked against the version the snapshot says is in force.
func (h *harness) state(t *testing.T, schemaName, name string, at *change.Position) string {
	t.Helper()
	var tbl *change.Table
	var ok bool
	if at == nil {
		tbl, ok = h.s.Table(schemaName, name)
	} else {
		tbl, ok = h.s.TableAt(schemaName, name, *at)
	}
	var th *change.SchemaTableHistory
	snap := h.s.Snapshot()
	for i := range snap.Tables {
		if c := &snap.Tables[i]; c.Schema == schemaName && c.Name == name {
			th = c
		}
	}
	var v *change.SchemaVersion
	if th != nil {
		for i := range th.Versions {
			if at == nil || th.Versions[i].Pos.Compare(*at) <= 0 {
				v = &th.Versions[i]
			}
		}
	}
	until, pending := h.s.Unknown(schemaName, name)
	if pending != (th != nil && th.Pending != nil) || pending && until != th.Pending.Until {
		t.Fatalf("%s.%s: Unknown = %s, %v; the snapshot's pending state is %+v", schemaName, name, until, pending, th)
	}
	inForce := v != nil && v.Table != nil && !v.Unknown
	if ok != inForce || ok && !reflect.DeepEqual(tbl, v.Table) {
		t.Fatalf("%s.%s: Table(At) = %+v, %v; the snapshot's version in force is %+v", schemaName, name, tbl, ok, v)
	}
	full := schemaName + "." + name
	switch {
	case ok && at == nil && pending:
		// Not a state the tracker should reach: say so.
		return tableText(tbl.FullName()+": ", tbl, v.Indexes, "  ") + "\n  and unknown until " + fmtPos(until)
	case ok:
		return tableText(tbl.FullName()+": ", tbl, v.Indexes, "  ")
	case at == nil && pending:
		return full + ": unknown until " + fmtPos(until)
	case v != nil && v.Unknown:
		return full + ": unknown"
	}
	return full + ": absent"
}

// checkArgs fails on an argument the command does not take; tables
// (arguments without a value) are always allowed.
func checkArgs(t *testing.T, d *datadriven.TestData, allowed ...string) {
	t.Helper()
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 && !slices.Contains(allowed, a.Key) {
			d.Fatalf(t, "%s takes no argument %s", d.Cmd, a.Key)
		}
	}
}

// tableArgs are the value-less arguments, each "schema.table".
func tableArgs(t *testing.T, d *datadriven.TestData) [][2]string {
	t.Helper()
	var out [][2]string
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 {
			continue
		}
		schemaName, name, ok := strings.Cut(a.Key, ".")
		if !ok {
			d.Fatalf(t, "%s: table %q is not schema.table", d.Cmd, a.Key)
		}
		out = append(out, [2]string{schemaName, name})
	}
	if len(out) == 0 {
		d.Fatalf(t, "%s: name a table", d.Cmd)
	}
	return out
}

func oneTable(t *testing.T, d *datadriven.TestData) [2]string {
	t.Helper()
	n := tableArgs(t, d)
	if len(n) != 1 {
		d.Fatalf(t, "%s takes one table", d.Cmd)
	}
	return n[0]
}

func dbArg(t *testing.T, d *datadriven.TestData) string {
	t.Helper()
	db := "db"
	if d.HasArg("db") {
		d.ScanArgs(t, "db", &db)
	}
	return db
}

// defaultFile is the binlog file of positions written as a bare offset.
const defaultFile = "binlog.000001"

func posArg(t *testing.T, d *datadriven.TestData, key string) change.Position {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	file, off := defaultFile, s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		file, off = s[:i], s[i+1:]
	}
	n, err := strconv.ParseUint(off, 10, 32)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return change.Position{File: file, Pos: uint32(n)}
}

// createdTable names the one table the input's CREATE TABLE creates.
func createdTable(t *testing.T, d *datadriven.TestData, db string) (schemaName, name string) {
	t.Helper()
	touches, err := schema.DDLTables(db, d.Input, 0)
	if err != nil || len(touches) != 1 {
		d.Fatalf(t, "the input creates %+v, %v; want one table", touches, err)
	}
	schemaName, name, _ = strings.Cut(touches[0].Table, ".")
	return schemaName, name
}

// TestSnapshotAt: a history rewound to a boundary reads as the tracker
// did there, and applies the later DDL again.
func TestSnapshotAt(t *testing.T) {
	at := func(n uint32) change.Position { return change.Position{File: "binlog.000001", Pos: n} }
	tr := schema.NewTracker()
	if err := tr.LoadCreate(at(4), "db", "CREATE TABLE a (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		pos uint32
		sql string
	}{{100, "ALTER TABLE a ADD COLUMN n INT"}, {200, "CREATE TABLE b (id INT PRIMARY KEY)"}, {300, "ALTER TABLE a DROP COLUMN n"}} {
		if _, err := tr.ApplyDDL(at(d.pos), "db", d.sql, 0); err != nil {
			t.Fatal(err)
		}
	}
	back, err := schema.Restore(schema.SnapshotAt(tr.Snapshot(), at(150)))
	if err != nil {
		t.Fatal(err)
	}
	if got := back.TablesAt(at(150)); !slices.Equal(got, []string{"db.a"}) {
		t.Errorf("tables at 150: %v, want [db.a]", got)
	}
	if a, _ := back.Table("db", "a"); len(a.Columns) != 2 {
		t.Errorf("db.a at 150 has %d columns, want 2 (id, n)", len(a.Columns))
	}
	if changed, err := back.ApplyDDL(at(200), "db", "CREATE TABLE b (id INT PRIMARY KEY)", 0); err != nil || len(changed) != 1 {
		t.Errorf("CREATE TABLE b again after rewinding: changed %v, %v; want [db.b]", changed, err)
	}
	if got := tr.TablesAt(at(250)); !slices.Equal(got, []string{"db.a", "db.b"}) {
		t.Errorf("tables at 250: %v", got)
	}
}

// TestRebaseOnAnotherServer: after a switch to a server whose binlog
// files are numbered below the old one's, its DDL is applied at its own
// positions, and the tables stand as they stood at the switch; a
// dropped table is forgotten; a snapshot taken before is unchanged.
func TestRebaseOnAnotherServer(t *testing.T) {
	old := func(n uint32) change.Position { return change.Position{File: "binlog.000009", Pos: n} }
	now := func(n uint32) change.Position { return change.Position{File: "binlog.000002", Pos: n} }
	tr := schema.NewTracker()
	for _, c := range []string{"CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE gone (id INT PRIMARY KEY)"} {
		if err := tr.LoadCreate(old(4), "db", c); err != nil {
			t.Fatal(err)
		}
	}
	for i, sql := range []string{"ALTER TABLE a ADD COLUMN n INT", "DROP TABLE gone"} {
		if _, err := tr.ApplyDDL(old(uint32(100*(i+1))), "db", sql, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := tr.Snapshot()
	beforeJSON, _ := json.Marshal(before)
	tr.Rebase()
	changed, err := tr.ApplyDDL(now(50), "db", "ALTER TABLE a ADD COLUMN m INT", 0)
	if err != nil || !slices.Equal(changed, []string{"db.a"}) {
		t.Fatalf("the new server's ALTER: changed %v, %v; want [db.a]", changed, err)
	}
	if a, _ := tr.Table("db", "a"); len(a.Columns) != 3 {
		t.Errorf("db.a has %d columns, want 3 (id, n, m)", len(a.Columns))
	}
	if a, ok := tr.TableAt("db", "a", now(10)); !ok || len(a.Columns) != 2 {
		t.Errorf("db.a before the new server's ALTER: %v %v, want its 2 columns at the switch", a, ok)
	}
	if got := tr.TablesAt(now(60)); !slices.Equal(got, []string{"db.a"}) {
		t.Errorf("tables after the switch: %v, want [db.a] (gone was dropped)", got)
	}
	if again, _ := json.Marshal(before); string(again) != string(beforeJSON) {
		t.Errorf("Rebase changed a snapshot taken before it")
	}
}
