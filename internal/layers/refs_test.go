package layers

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// privateRefs are references a user's clone cannot follow: the project's internal design notes
// and source-document numbering. Sources are cited by their keys in docs/references.md.
var privateRefs = []string{
	"DESIGN" + ".md", "DESIGN" + " §", "seed" + " 00", "../" + "shared",
}

// TestNoPrivateReferences checks every Go, Markdown and shell file of the module (and .ci/run)
// for references to material outside the repository.
func TestNoPrivateReferences(t *testing.T) {
	root, _ := moduleRoot(t)
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") && name != ".ci" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".md", ".sh", ".c", ".h", ".py":
		default:
			if name != "run" && name != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			for _, ref := range privateRefs {
				if bytes.Contains(line, []byte(ref)) {
					rel, _ := filepath.Rel(root, path)
					bad = append(bad, rel+":"+strconv.Itoa(i+1)+": "+ref)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "cite sources by their keys in docs/references.md instead")
}
