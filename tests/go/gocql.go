//go:build tools

// Package gocqlsuite only pins github.com/gocql/gocql v1.7.0 for tests/python/test_gocql.py, which
// runs that module's own integration tests (`go test github.com/gocql/gocql`) against a hayate
// node; the tools build tag keeps this file out of every build.
package gocqlsuite

import _ "github.com/gocql/gocql"
