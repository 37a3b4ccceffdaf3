// Package spec is the destination spec: its YAML/JSON form, defaults,
// validation, table filters, route rules, start positions, the consumers
// block and the replica server ids braid presents.
//
// # Errors
//
// Parse walks the YAML (or JSON) document itself, along the yaml tags of
// Spec, rather than stopping at the first decode error, so that a user
// fixes a spec in one round: it reports every unknown key (with the key it
// was probably meant to be), every value of the wrong form and every
// problem Validate finds, each a *FieldError with the YAML path
// ("sources[1].address") and line it concerns, joined with errors.Join
// into one problem per line:
//
//	line 6: sources[1]: unknown key "adress" (did you mean "address"?)
//	line 7: heartbeat: "5 seconds" is not a duration: write e.g. 200ms, 1s, 5m or 1h30m
//
// A message says what is wrong and what to write instead, in the words of
// the spec; it never names a Go type. A problem that only follows from
// another (the missing address of a source whose "adress" is reported) is
// left out.
//
// # Invariants
//
//   - Parse and Validate report every problem at once; Validate on a spec
//     built in Go names the same paths, without lines. Neither modifies
//     the spec (WithDefaults returns a copy).
//   - A spec that Parse accepts reads as yaml.v3's strict decoding read it
//     (but for a source's address written as a list, which yaml.v3 would
//     refuse and Parse keeps joined with commas: Source.Addresses), and
//     the YAML of a parsed spec (yaml.Marshal) parses back to it.
//   - A source's replica server_id is the spec's or DeriveServerID of the
//     destination and source names: the same spec always presents the same
//     ids, never random ones.
//
// # Concurrency
//
// A Spec is a value; a compiled TableFilter is read-only and safe for
// concurrent use.
package spec
