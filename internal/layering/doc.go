// Package layering checks that braid's packages import one another only in
// the direction DESIGN.md draws ("The data path, and the house that should
// show it"): cmd → cluster → sink/api → stream → group → binlog → schema →
// change, with spec beside them at the bottom.
//
// The package has no code of its own, only tests, run by `make test` and
// `make lint`:
//
//   - TestLayering lists every package of the module (`go list -json ./...`
//     from the module root) and fails, naming the package and the import,
//     when a package's non-test files import a braid package its entry in
//     the table (table_test.go) does not allow, or when a package has no
//     entry at all. Test files may import anything: a test of group may
//     start a mariadbd through internal/testutil/mysqltest.
//   - TestBinaryLinksNoTestHarness fails when `go list -deps ./cmd/braid`
//     contains an internal/testutil package: the shipped binary links no
//     test harness (and so no runner that calls `go build`).
//   - TestCheck feeds the checker a made-up module, so the checker itself is
//     tested.
//
// Imports from outside the module are not checked.
//
// # Invariants
//
//   - The table is data: one entry per package (or package tree, "sink/..."),
//     the braid packages its non-test files may import. Changing the layering
//     means changing DESIGN.md and the table together.
//   - A new package fails TestLayering until it has an entry, so the table
//     cannot fall behind the tree.
//
// # Concurrency
//
// Nothing here runs outside `go test`; the tests run `go list` and wait for
// it.
package layering
