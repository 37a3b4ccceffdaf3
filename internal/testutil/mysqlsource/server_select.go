package mysqlsource

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// SELECTs run on a small evaluator over TiDB's parse tree: FROM one table
// or a join of tables (information_schema's views and the catalog's
// tables), WHERE, ORDER BY, LIMIT, and the expressions braid and go-mysql
// send (variables, comparisons, AND/OR/NOT, IN, IS NULL, LIKE, BETWEEN,
// arithmetic, and a few functions). What it does not know fails with
// errUnsupported, which the caller answers as an unknown statement.

// errUnsupported: the statement is valid SQL the evaluator does not know.
var errUnsupported = errors.New("unsupported")

// relation is rows with named columns; qual is each column's table name
// or alias (lower case), for qualified names and joins.
type relation struct {
	qual []string
	cols []string
	rows [][]any
}

func (c *session) parse(q string) (ast.StmtNode, error) {
	if c.parser == nil {
		c.parser = parser.New()
	}
	stmts, _, err := c.parser.Parse(q, "", "")
	if err != nil || len(stmts) != 1 {
		return nil, errUnsupported
	}
	return stmts[0], nil
}

// selectStmt runs a SELECT.
func (c *session) selectStmt(sel *ast.SelectStmt) ([]string, [][]any, error) {
	if sel.GroupBy != nil || sel.Having != nil || sel.Distinct || sel.With != nil {
		return nil, nil, errUnsupported
	}
	rel := relation{rows: [][]any{{}}}
	if sel.From != nil {
		var err error
		if rel, err = c.from(sel.From.TableRefs); err != nil {
			return nil, nil, err
		}
	}
	// Names resolve before any row is read, as MySQL resolves them: an
	// unknown column fails the statement even on an empty table.
	for _, f := range sel.Fields.Fields {
		if err := rel.check(f.Expr, "field list"); err != nil {
			return nil, nil, err
		}
	}
	if err := rel.check(sel.Where, "where clause"); err != nil {
		return nil, nil, err
	}
	if sel.OrderBy != nil {
		for _, item := range sel.OrderBy.Items {
			if err := rel.check(item.Expr, "order clause"); err != nil {
				return nil, nil, err
			}
		}
	}
	if sel.Where != nil {
		var kept [][]any
		for _, row := range rel.rows {
			v, err := c.eval(sel.Where, &rel, row, "where clause")
			if err != nil {
				return nil, nil, err
			}
			if truthy(v) {
				kept = append(kept, row)
			}
		}
		rel.rows = kept
	}
	if sel.OrderBy != nil {
		keys := make([][]any, len(rel.rows))
		for i, row := range rel.rows {
			for _, item := range sel.OrderBy.Items {
				v, err := c.eval(item.Expr, &rel, row, "order clause")
				if err != nil {
					return nil, nil, err
				}
				keys[i] = append(keys[i], v)
			}
		}
		idx := make([]int, len(rel.rows))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			for k, item := range sel.OrderBy.Items {
				r := order(keys[a][k], keys[b][k])
				if item.Desc {
					r = -r
				}
				if r != 0 {
					return r
				}
			}
			return 0
		})
		sorted := make([][]any, len(idx))
		for i, j := range idx {
			sorted[i] = rel.rows[j]
		}
		rel.rows = sorted
	}
	if sel.Limit != nil {
		count, err := c.evalInt(sel.Limit.Count, &rel)
		if err != nil {
			return nil, nil, err
		}
		offset := int64(0)
		if sel.Limit.Offset != nil {
			if offset, err = c.evalInt(sel.Limit.Offset, &rel); err != nil {
				return nil, nil, err
			}
		}
		offset = min(offset, int64(len(rel.rows)))
		end := min(offset+count, int64(len(rel.rows)))
		rel.rows = rel.rows[offset:end]
	}

	var names []string
	var exprs []func(row []any) (any, error)
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			qual := strings.ToLower(f.WildCard.Table.O)
			for i, name := range rel.cols {
				if qual == "" || rel.qual[i] == qual {
					names = append(names, name)
					exprs = append(exprs, func(row []any) (any, error) { return row[i], nil })
				}
			}
			continue
		}
		name := f.AsName.O
		if name == "" {
			if cn, ok := f.Expr.(*ast.ColumnNameExpr); ok {
				if i, err := rel.find(cn.Name, "field list"); err == nil {
					name = rel.cols[i]
				}
			}
		}
		if name == "" {
			name = strings.TrimSpace(f.Text())
		}
		names = append(names, name)
		expr := f.Expr
		exprs = append(exprs, func(row []any) (any, error) { return c.eval(expr, &rel, row, "field list") })
	}
	out := make([][]any, 0, len(rel.rows))
	for _, row := range rel.rows {
		o := make([]any, len(exprs))
		for i, e := range exprs {
			v, err := e(row)
			if err != nil {
				return nil, nil, err
			}
			o[i] = v
		}
		out = append(out, o)
	}
	return names, out, nil
}

// from builds the relation of a FROM clause.
func (c *session) from(n ast.ResultSetNode) (relation, error) {
	switch x := n.(type) {
	case *ast.Join:
		left, err := c.from(x.Left)
		if err != nil || x.Right == nil {
			return left, err
		}
		right, err := c.from(x.Right)
		if err != nil {
			return relation{}, err
		}
		out := relation{qual: append(slices.Clone(left.qual), right.qual...), cols: append(slices.Clone(left.cols), right.cols...)}
		for _, l := range left.rows {
			matched := false
			for _, r := range right.rows {
				row := append(slices.Clone(l), r...)
				if x.On != nil {
					v, err := c.eval(x.On.Expr, &out, row, "on clause")
					if err != nil {
						return relation{}, err
					}
					if !truthy(v) {
						continue
					}
				}
				matched = true
				out.rows = append(out.rows, row)
			}
			if !matched && x.Tp == ast.LeftJoin {
				out.rows = append(out.rows, append(slices.Clone(l), make([]any, len(right.cols))...))
			}
		}
		if x.Tp == ast.RightJoin {
			return relation{}, errUnsupported
		}
		return out, nil
	case *ast.TableSource:
		tn, ok := x.Source.(*ast.TableName)
		if !ok {
			return relation{}, errUnsupported
		}
		rel, err := c.table(tn.Schema.O, tn.Name.O)
		if err != nil {
			return relation{}, err
		}
		qual := strings.ToLower(tn.Name.O)
		if x.AsName.O != "" {
			qual = strings.ToLower(x.AsName.O)
		}
		for i := range rel.qual {
			rel.qual[i] = qual
		}
		return rel, nil
	}
	return relation{}, errUnsupported
}

// table is the rows of db.name: an information_schema view or a catalog
// table.
func (c *session) table(db, name string) (relation, error) {
	if db == "" {
		db = c.db
	}
	if db == "" {
		return relation{}, mysql.NewDefaultError(mysql.ER_NO_DB_ERROR)
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.EqualFold(db, "information_schema") {
		cols, rows, ok := s.infoSchemaLocked(name)
		if !ok {
			return relation{}, mysql.NewDefaultError(mysql.ER_UNKNOWN_TABLE, name, "information_schema")
		}
		return relation{qual: make([]string, len(cols)), cols: cols, rows: rows}, nil
	}
	_, t, ok := s.tableLocked(db, name)
	if !ok {
		return relation{}, mysql.NewDefaultError(mysql.ER_NO_SUCH_TABLE, db, name)
	}
	rel := relation{qual: make([]string, len(t.Columns))}
	for _, col := range t.Columns {
		rel.cols = append(rel.cols, col.Name)
	}
	for _, row := range t.Rows {
		if len(row) != len(t.Columns) {
			return relation{}, mysql.NewError(mysql.ER_UNKNOWN_ERROR, fmt.Sprintf("mysqlsource: catalog table %s.%s has a row of %d values for %d columns", db, name, len(row), len(t.Columns)))
		}
		rel.rows = append(rel.rows, slices.Clone(row))
	}
	return rel, nil
}

// check resolves every column e names.
func (r *relation) check(e ast.ExprNode, clause string) error {
	if e == nil {
		return nil
	}
	var refs columnRefs
	e.Accept(&refs)
	for _, n := range refs {
		if _, err := r.find(n, clause); err != nil {
			return err
		}
	}
	return nil
}

// columnRefs collects the column names of an expression.
type columnRefs []*ast.ColumnName

func (v *columnRefs) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		*v = append(*v, c.Name)
	}
	return n, false
}

func (v *columnRefs) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// find is the index of a column name in the relation.
func (r *relation) find(n *ast.ColumnName, clause string) (int, error) {
	qual := strings.ToLower(n.Table.O)
	found := -1
	for i, col := range r.cols {
		if !strings.EqualFold(col, n.Name.O) || qual != "" && r.qual[i] != qual {
			continue
		}
		if found >= 0 {
			return 0, mysql.NewDefaultError(mysql.ER_NON_UNIQ_ERROR, n.Name.O, clause)
		}
		found = i
	}
	if found < 0 {
		name := n.Name.O
		if qual != "" {
			name = n.Table.O + "." + name
		}
		return 0, mysql.NewDefaultError(mysql.ER_BAD_FIELD_ERROR, name, clause)
	}
	return found, nil
}

func (c *session) evalInt(e ast.ExprNode, rel *relation) (int64, error) {
	v, err := c.eval(e, rel, nil, "limit")
	if err != nil {
		return 0, err
	}
	f, ok := number(v)
	if !ok {
		return 0, errUnsupported
	}
	return int64(f), nil
}

// eval evaluates e on one row of rel.
func (c *session) eval(e ast.ExprNode, rel *relation, row []any, clause string) (any, error) {
	ev := func(x ast.ExprNode) (any, error) { return c.eval(x, rel, row, clause) }
	switch x := e.(type) {
	case *test_driver.ValueExpr:
		switch v := x.GetValue().(type) {
		case nil, int64, uint64, float64, string:
			return v, nil
		case []byte:
			return string(v), nil
		case float32:
			return float64(v), nil
		case *test_driver.MyDecimal:
			f, err := strconv.ParseFloat(v.String(), 64)
			if err != nil {
				return nil, errUnsupported
			}
			return f, nil
		default:
			return nil, errUnsupported
		}
	case *ast.ParenthesesExpr:
		return ev(x.Expr)
	case *ast.ColumnNameExpr:
		i, err := rel.find(x.Name, clause)
		if err != nil {
			return nil, err
		}
		return row[i], nil
	case *ast.VariableExpr:
		if x.Value != nil {
			return nil, errUnsupported // SELECT @x := ...
		}
		if !x.IsSystem {
			return c.user[strings.ToLower(x.Name)], nil
		}
		return c.sysvar(x.Name, x.IsGlobal, x.ExplicitScope)
	case *ast.UnaryOperationExpr:
		v, err := ev(x.V)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case opcode.Not, opcode.Not2:
			if v == nil {
				return nil, nil
			}
			return boolInt(!truthy(v)), nil
		case opcode.Minus:
			switch n := v.(type) {
			case nil:
				return nil, nil
			case int64:
				return -n, nil
			}
			f, _ := number(v)
			return -f, nil
		case opcode.Plus:
			return v, nil
		}
		return nil, errUnsupported
	case *ast.BinaryOperationExpr:
		return c.binary(x, ev)
	case *ast.IsNullExpr:
		v, err := ev(x.Expr)
		if err != nil {
			return nil, err
		}
		return boolInt((v == nil) != x.Not), nil
	case *ast.PatternInExpr:
		if x.Sel != nil {
			return nil, errUnsupported
		}
		v, err := ev(x.Expr)
		if err != nil || v == nil {
			return nil, err
		}
		in := false
		for _, item := range x.List {
			w, err := ev(item)
			if err != nil {
				return nil, err
			}
			if r, ok := compare(v, w); ok && r == 0 {
				in = true
			}
		}
		return boolInt(in != x.Not), nil
	case *ast.BetweenExpr:
		v, err := ev(x.Expr)
		if err != nil {
			return nil, err
		}
		lo, err := ev(x.Left)
		if err != nil {
			return nil, err
		}
		hi, err := ev(x.Right)
		if err != nil {
			return nil, err
		}
		a, ok1 := compare(v, lo)
		b, ok2 := compare(v, hi)
		if !ok1 || !ok2 {
			return nil, nil
		}
		return boolInt((a >= 0 && b <= 0) != x.Not), nil
	case *ast.PatternLikeOrIlikeExpr:
		v, err := ev(x.Expr)
		if err != nil {
			return nil, err
		}
		p, err := ev(x.Pattern)
		if err != nil {
			return nil, err
		}
		if v == nil || p == nil {
			return nil, nil
		}
		return boolInt(like(text(v), text(p), x.Escape) != x.Not), nil
	case *ast.FuncCallExpr:
		return c.call(x, ev)
	}
	return nil, errUnsupported
}

func (c *session) binary(x *ast.BinaryOperationExpr, ev func(ast.ExprNode) (any, error)) (any, error) {
	l, err := ev(x.L)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case opcode.LogicAnd:
		if l != nil && !truthy(l) {
			return int64(0), nil
		}
		r, err := ev(x.R)
		if err != nil {
			return nil, err
		}
		if r != nil && !truthy(r) {
			return int64(0), nil
		}
		if l == nil || r == nil {
			return nil, nil
		}
		return int64(1), nil
	case opcode.LogicOr:
		if l != nil && truthy(l) {
			return int64(1), nil
		}
		r, err := ev(x.R)
		if err != nil {
			return nil, err
		}
		if r != nil && truthy(r) {
			return int64(1), nil
		}
		if l == nil || r == nil {
			return nil, nil
		}
		return int64(0), nil
	}
	r, err := ev(x.R)
	if err != nil {
		return nil, err
	}
	switch x.Op {
	case opcode.NullEQ:
		if l == nil || r == nil {
			return boolInt(l == nil && r == nil), nil
		}
		c, _ := compare(l, r)
		return boolInt(c == 0), nil
	case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
		c, ok := compare(l, r)
		if !ok {
			return nil, nil
		}
		var b bool
		switch x.Op {
		case opcode.EQ:
			b = c == 0
		case opcode.NE:
			b = c != 0
		case opcode.LT:
			b = c < 0
		case opcode.LE:
			b = c <= 0
		case opcode.GT:
			b = c > 0
		case opcode.GE:
			b = c >= 0
		}
		return boolInt(b), nil
	case opcode.Plus, opcode.Minus, opcode.Mul, opcode.Div:
		if l == nil || r == nil {
			return nil, nil
		}
		li, lok := l.(int64)
		ri, rok := r.(int64)
		if lok && rok && x.Op != opcode.Div {
			switch x.Op {
			case opcode.Plus:
				return li + ri, nil
			case opcode.Minus:
				return li - ri, nil
			case opcode.Mul:
				return li * ri, nil
			}
		}
		a, _ := number(l)
		b, _ := number(r)
		switch x.Op {
		case opcode.Plus:
			return a + b, nil
		case opcode.Minus:
			return a - b, nil
		case opcode.Mul:
			return a * b, nil
		default:
			if b == 0 {
				return nil, nil
			}
			return a / b, nil
		}
	}
	return nil, errUnsupported
}

// call evaluates the functions braid and its libraries send.
func (c *session) call(x *ast.FuncCallExpr, ev func(ast.ExprNode) (any, error)) (any, error) {
	args := func() ([]any, error) {
		out := make([]any, len(x.Args))
		for i, a := range x.Args {
			v, err := ev(a)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	now := c.now
	switch x.FnName.L {
	case "version":
		return c.s.p.version, nil
	case "database", "schema":
		if c.db == "" {
			return nil, nil
		}
		return c.db, nil
	case "connection_id":
		return int64(c.conn.ConnectionID()), nil
	case "current_user", "user", "session_user", "system_user":
		return c.conn.GetUser() + "@127.0.0.1", nil
	case "now", "current_timestamp", "localtime", "localtimestamp", "sysdate":
		return now.In(c.location()).Format(time.DateTime), nil
	case "utc_timestamp":
		return now.UTC().Format(time.DateTime), nil
	case "unix_timestamp":
		if len(x.Args) == 0 {
			return now.Unix(), nil
		}
		return nil, errUnsupported
	case "timestampdiff":
		if len(x.Args) != 3 {
			return nil, errUnsupported
		}
		unit, ok := x.Args[0].(*ast.TimeUnitExpr)
		if !ok {
			return nil, errUnsupported
		}
		a, err := ev(x.Args[1])
		if err != nil {
			return nil, err
		}
		b, err := ev(x.Args[2])
		if err != nil {
			return nil, err
		}
		if a == nil || b == nil {
			return nil, nil
		}
		ta, err1 := time.Parse(time.DateTime, text(a))
		tb, err2 := time.Parse(time.DateTime, text(b))
		if err1 != nil || err2 != nil {
			return nil, nil
		}
		d := tb.Sub(ta)
		switch unit.Unit {
		case ast.TimeUnitSecond:
			return int64(d / time.Second), nil
		case ast.TimeUnitMinute:
			return int64(d / time.Minute), nil
		case ast.TimeUnitHour:
			return int64(d / time.Hour), nil
		}
		return nil, errUnsupported
	case "coalesce", "ifnull":
		vs, err := args()
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v != nil {
				return v, nil
			}
		}
		return nil, nil
	case "concat":
		vs, err := args()
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, v := range vs {
			if v == nil {
				return nil, nil
			}
			b.WriteString(text(v))
		}
		return b.String(), nil
	case "upper", "ucase", "lower", "lcase":
		vs, err := args()
		if err != nil || len(vs) != 1 || vs[0] == nil {
			return nil, err
		}
		if x.FnName.L == "upper" || x.FnName.L == "ucase" {
			return strings.ToUpper(text(vs[0])), nil
		}
		return strings.ToLower(text(vs[0])), nil
	case "if":
		if len(x.Args) != 3 {
			return nil, errUnsupported
		}
		cond, err := ev(x.Args[0])
		if err != nil {
			return nil, err
		}
		if truthy(cond) {
			return ev(x.Args[1])
		}
		return ev(x.Args[2])
	}
	return nil, errUnsupported
}

// location is the session's time zone.
func (c *session) location() *time.Location {
	tz, _ := c.sysvar("time_zone", false, false)
	zone := text(tz)
	if strings.EqualFold(zone, "SYSTEM") {
		sys, _ := c.sysvar("system_time_zone", true, true)
		zone = text(sys)
	}
	if len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' {
		h, err1 := strconv.Atoi(zone[1:3])
		m, err2 := strconv.Atoi(zone[4:])
		if err1 == nil && err2 == nil {
			off := h*3600 + m*60
			if zone[0] == '-' {
				off = -off
			}
			return time.FixedZone(zone, off)
		}
	}
	if loc, err := time.LoadLocation(zone); err == nil {
		return loc
	}
	return time.UTC
}

// text is a value as MySQL prints it.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strings.Replace(strconv.FormatFloat(x, 'g', -1, 64), "e+", "e", 1)
	case time.Time:
		return x.Format(time.DateTime)
	}
	return fmt.Sprint(v)
}

// number is v as a number, when it is one or text that reads as one.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	case []byte:
		f, err := strconv.ParseFloat(strings.TrimSpace(string(x)), 64)
		return f, err == nil
	}
	return 0, false
}

func isNumeric(v any) bool {
	switch v.(type) {
	case int64, uint64, float64:
		return true
	}
	return false
}

// compare compares as MySQL does for these types: numbers as numbers
// (a string against a number as a number), strings byte-wise. ok is
// false when either is NULL.
func compare(a, b any) (int, bool) {
	if a == nil || b == nil {
		return 0, false
	}
	if ai, ok := a.(int64); ok {
		if bi, ok := b.(int64); ok {
			return cmpOrdered(ai, bi), true
		}
	}
	if au, ok := a.(uint64); ok {
		if bu, ok := b.(uint64); ok {
			return cmpOrdered(au, bu), true
		}
	}
	if isNumeric(a) || isNumeric(b) {
		fa, _ := number(a)
		fb, _ := number(b)
		return cmpOrdered(fa, fb), true
	}
	return bytes.Compare([]byte(text(a)), []byte(text(b))), true
}

func cmpOrdered[T int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// order sorts NULL first, as MySQL's ascending order does.
func order(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	r, _ := compare(a, b)
	return r
}

func truthy(v any) bool {
	if v == nil {
		return false
	}
	f, ok := number(v)
	return ok && f != 0
}

func boolInt(b bool) any {
	if b {
		return int64(1)
	}
	return int64(0)
}

// like matches s against a LIKE pattern, case-insensitively (the
// collations of the names SHOW and information_schema compare are).
func like(s, p string, escape byte) bool {
	s, p = strings.ToLower(s), strings.ToLower(p)
	if escape == 0 {
		escape = '\\'
	}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for j < len(p) {
			switch ch := p[j]; {
			case ch == '%':
				for k := i; k <= len(s); k++ {
					if match(k, j+1) {
						return true
					}
				}
				return false
			case ch == '_':
				if i >= len(s) {
					return false
				}
				i++
				j++
			default:
				if ch == escape && j+1 < len(p) {
					j++
					ch = p[j]
				}
				if i >= len(s) || s[i] != ch {
					return false
				}
				i++
				j++
			}
		}
		return i == len(s)
	}
	return match(0, 0)
}
