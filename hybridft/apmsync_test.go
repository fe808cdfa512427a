package hybridft

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/testutil"
)

// The provider migrates by itself (MigrateAuto) before the manager handles EventPathMig; a
// path load in that window used to choose the alternate against the old primary, arm the new
// primary as its own alternate and leave the connection away from its home rail for good
// (TestRailFlapping under load). Here the migration happens with no event at all: the manager
// must still see it on the queue pair, load the home path and give it back.
func TestAPMMigrationBehindManager(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newNode(t, testOptions(), 2, 1<<16), newNode(t, testOptions(), 2, 1<<16)
	link(t, a, b, 2, ConnectOptions{})
	waitArmed(t, a.conns...)
	c := a.conns[0]
	require.NoError(t, c.QP().Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState))
	require.Equal(t, uint8(2), c.QP().Query().AV.PortNum)
	require.Eventually(t, func() bool {
		q := c.QP().Query()
		return q.AV.PortNum == 1 && q.PathMigState == ibv.Armed && q.AltAV.PortNum == 2 && c.Port() == 1
	}, 20*time.Second, time.Millisecond, "home path given back and the other rail armed again")
	require.Equal(t, int64(1), c.Stats().GiveBacks)
}

// An ARMED alternate the manager did not choose (here: the primary path itself, loaded behind
// its back) gets no event ever; the manager replaces it with a useful one.
func TestAPMStaleArmedAlternate(t *testing.T) {
	testutil.CheckGoroutines(t)
	a, b := newNode(t, testOptions(), 2, 1<<16), newNode(t, testOptions(), 2, 1<<16)
	link(t, a, b, 2, ConnectOptions{})
	waitArmed(t, a.conns...)
	c := a.conns[0]
	q := c.QP().Query()
	require.Equal(t, uint8(2), q.AltAV.PortNum)
	require.NoError(t, c.QP().Modify(&ibv.QPAttr{AltAV: q.AV, AltPortNum: q.AV.PortNum, PathMigState: ibv.Rearm},
		ibv.AttrAltPath|ibv.AttrPathMigState))
	require.Eventually(t, func() bool {
		q := c.QP().Query()
		return q.PathMigState == ibv.Armed && q.AltAV.PortNum == 2
	}, 20*time.Second, time.Millisecond, "the other rail armed again as the alternate")
	require.Equal(t, uint8(1), c.Port())
}
