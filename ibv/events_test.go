package ibv_test

import (
	"context"
	"testing"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangGuard bounds blocking calls in tests so a bug shows as a failure instead of a hung binary;
// it is not a timing assertion.
const hangGuard = 30 * time.Second

func nextEvent(t *testing.T, c *ibv.Context) ibv.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	ev, err := c.GetAsyncEvent(ctx)
	require.NoError(t, err)
	return ev
}

func TestAsyncEventsFIFO(t *testing.T) {
	c, _ := newStub(t)
	provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventPortErr, Port: 1})
	provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventQPFatal, QPNum: 3})
	provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventPortActive, Port: 1})
	assert.Equal(t, ibv.EventPortErr, nextEvent(t, c).Type)
	ev := nextEvent(t, c)
	assert.Equal(t, ibv.EventQPFatal, ev.Type)
	assert.Equal(t, uint32(3), ev.QPNum)
	assert.Equal(t, ibv.EventPortActive, nextEvent(t, c).Type)
}

func TestAsyncEventBlocksUntilPosted(t *testing.T) {
	c, _ := newStub(t)
	got := make(chan ibv.AsyncEvent, 1)
	go func() {
		ev, err := c.GetAsyncEvent(context.Background())
		if err == nil {
			got <- ev
		}
		close(got)
	}()
	provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventCommEst, QPNum: 4})
	ev, ok := <-got
	require.True(t, ok)
	assert.Equal(t, ibv.EventCommEst, ev.Type)
}

func TestAsyncEventContextAndClose(t *testing.T) {
	c, d := newStub(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.GetAsyncEvent(ctx)
	assert.ErrorIs(t, err, context.Canceled)

	errc := make(chan error, 1)
	go func() {
		_, err := c.GetAsyncEvent(context.Background())
		errc <- err
	}()
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-errc, ibv.ErrClosed)
	require.NoError(t, c.Close(), "second Close is a no-op")
	assert.Equal(t, 1, d.closed, "the driver is closed once")
	assert.True(t, provider.Closed(c))
	_, err = c.AllocPD()
	assert.ErrorIs(t, err, ibv.ErrClosed)
	_, err = c.CreateCQ(1)
	assert.ErrorIs(t, err, ibv.ErrClosed)
}

func TestCloseDestroysQPs(t *testing.T) {
	qp, d := newStubQP(t, ibv.RC)
	c := qp.Context()
	require.NoError(t, c.Close())
	assert.True(t, d.qps[0].gone)
	assert.Nil(t, provider.LookupQP(c, qp.Num()))
	assert.ErrorIs(t, qp.Modify(&ibv.QPAttr{State: ibv.StateInit}, ibv.AttrState), ibv.ErrClosed)
}

func TestAsyncEventString(t *testing.T) {
	assert.Contains(t, ibv.AsyncEvent{Type: ibv.EventQPFatal, QPNum: 3}.String(), "qp=3")
	assert.Contains(t, ibv.AsyncEvent{Type: ibv.EventPortErr, Port: 2}.String(), "port=2")
}

func TestAddressHandle(t *testing.T) {
	c, _ := newStub(t)
	pd, err := c.AllocPD()
	require.NoError(t, err)
	_, err = pd.CreateAH(ibv.AHAttr{})
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument)
	ah, err := pd.CreateAH(ibv.AHAttr{Addr: "stub:2", PortNum: 1})
	require.NoError(t, err)
	assert.Equal(t, "stub:2", ah.Attr.Addr)
	_, err = pd.CreateSRQ(4)
	assert.ErrorIs(t, err, ibv.ErrUnsupported, "the stub has no SRQ")
}
