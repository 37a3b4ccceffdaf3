package verify

// Column is column, for the tests.
var Column = column
