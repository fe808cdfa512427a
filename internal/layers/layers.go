// Package layers holds goarmci's layer rule and its checker: every top-level folder of the module
// has a rank, and a package may import packages of its own folder or of a lower rank only
// (docs/architecture.md, "Layers"). The test of this package checks the whole module, so a
// fresh clone enforces the rule with `go test ./...`.
package layers

import (
	"fmt"
	"sort"
	"strings"
)

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
