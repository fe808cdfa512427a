package rma

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/internal/bootstrap"
	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/internal/logx"
)

// envDefaults are the GOARMCI_* values Config falls back to (internal/config parses them).
type envDefaults struct {
	cfg       config.Config
	transport Transport
	rails     []string
	job       string
	startup   time.Duration
	warnings  []config.Warning
}

func envConfig() (envDefaults, error) {
	c, warns, err := config.FromEnv()
	if err != nil {
		return envDefaults{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	d := envDefaults{cfg: c, transport: Transport(c.Transport), rails: c.Rails, startup: c.StartupTimeout, warnings: warns}
	// An explicit job id only: otherwise Init takes the bootstrap's, which names the job as the
	// launcher does and is unique per concurrent job (Slurm: "<job>.<step>", so two steps of one
	// allocation on a node never share file names).
	d.job = os.Getenv(config.EnvJobID)
	return d, nil
}

// newLogger builds the rank's logger from the environment's configuration.
func newLogger(c *config.Config, rank int) (zerolog.Logger, io.Closer) {
	l, closer, err := logx.New(c, rank)
	if err != nil {
		l = zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Int("rank", rank).Logger()
		l.Warn().Err(err).Msg("log configuration")
		return l, nil
	}
	return l, closer
}

// bootstrapFromEnv joins the job through the launcher's environment (internal/bootstrap).
func bootstrapFromEnv(ctx context.Context, log zerolog.Logger, c *config.Config) (Bootstrap, error) {
	info, err := bootstrap.Detect()
	if err != nil {
		return nil, err
	}
	b, err := bootstrap.Connect(ctx, info, bootstrap.WithLogger(log),
		bootstrap.WithFailureTimeout(c.FailureTimeout), bootstrap.WithPartitionTimeout(c.PartitionTimeout))
	if err != nil {
		return nil, err
	}
	return b, nil
}
