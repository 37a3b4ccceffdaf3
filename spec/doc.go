// Package spec is the destination spec: its YAML/JSON form, defaults,
// validation, table filters, route rules, start positions and the replica
// server ids braid presents.
//
// # Invariants
//
//   - Validate reports every problem at once, each naming the field a user
//     wrote; it does not modify the spec (WithDefaults returns a copy).
//   - A source's replica server_id is the spec's or DeriveServerID of the
//     destination and source names: the same spec always presents the same
//     ids, never random ones.
//
// # Concurrency
//
// A Spec is a value; a compiled TableFilter is read-only and safe for
// concurrent use.
package spec
