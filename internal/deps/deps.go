//go:build tools

// Package deps pins the third-party modules the project relies on.
package deps

import (
	_ "github.com/rs/zerolog"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "gonum.org/v1/plot"
)
