// Package layers holds goarmci's layer rule and its checker: every top-level folder of the module
// has a rank, and a package may import packages of its own folder or of a lower rank only
// (docs/architecture.md, "Layers"). It also holds the rule that keeps package unsafe in files
// named for it (UnsafeFile), and the rule that no exported declaration of a public package shows
// a type of an internal one (InternalLeaks). The tests of this package check the whole module,
// so a fresh clone enforces the rules with `go test ./...`.
package layers

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// unsafeName matches the Go files that may import package unsafe: <what>_unsafe.go, with the
// usual _test and GOOS/GOARCH suffixes after it (x_unsafe_test.go, x_unsafe_amd64.go).
var unsafeName = regexp.MustCompile(`_unsafe(_[a-z0-9]+)*\.go$`)

// UnsafeFile reports whether the Go file at path may import package unsafe: only files named
// <what>_unsafe.go (x_unsafe_test.go, x_unsafe_amd64.go, ...) may, so every use of unsafe in the
// module is found by its file name.
func UnsafeFile(path string) bool { return unsafeName.MatchString(filepath.Base(path)) }

// Ranks maps each top-level folder of the module to its layer; a folder not listed ranks above
// every listed one.
var Ranks = map[string]int{
	"internal":    0,
	"ibv":         1,
	"hybridft":    2,
	"multirail":   3,
	"rma":         4,
	"window":      5,
	"globalarray": 6,
	"bench":       7,
	"examples":    8,
	"cmd":         8,
}

// unranked is the rank of a folder Ranks does not list (and of the module's root package).
const unranked = 9

// folder is the top-level folder of package path pkg inside module mod ("" for a path outside
// the module, "." for the module's root package).
func folder(mod, pkg string) string {
	if pkg == mod {
		return "."
	}
	rest, ok := strings.CutPrefix(pkg, mod+"/")
	if !ok {
		return ""
	}
	f, _, _ := strings.Cut(rest, "/")
	return f
}

func rank(f string) int {
	if r, ok := Ranks[f]; ok {
		return r
	}
	return unranked
}

// Violations returns, sorted, one line per import of a higher layer in imports (package path →
// the package paths it imports) of module mod. Imports from outside the module are ignored.
func Violations(mod string, imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		from := folder(mod, pkg)
		if from == "" {
			continue
		}
		for _, imp := range imps {
			to := folder(mod, imp)
			if to == "" || to == from {
				continue
			}
			if rank(to) > rank(from) {
				out = append(out, fmt.Sprintf("layer violation: %s (%s, rank %d) imports %s (%s, rank %d)", pkg, from, rank(from), imp, to, rank(to)))
			}
		}
	}
	sort.Strings(out)
	return out
}
