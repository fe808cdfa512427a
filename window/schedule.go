package window

// dir is the direction of a queued data operation on the link: a put (RDMA write) loads the
// origin→target direction, a get (RDMA read) the target→origin one.
type dir uint8

const (
	dirPut dir = iota
	dirGet
)

// issueOrder appends to order the indexes of the data operations (directions dirs, sizes in
// bytes) in the order they are to be issued, and returns it.
//
// Without reordering it is program order. With reordering ([Vishnu07 §5.2.5]: an epoch imposes no
// order, so none is kept; §5.3.4: interleave puts and gets so both directions of a link carry
// data at once) the puts and the gets form two queues, each in program order, and the next
// operation comes from the queue whose direction has carried fewer bytes so far (the independent
// put and get load queues of §5.2.2); ties go to the put queue. For puts and gets of one size
// this alternates put, get, put, get.
//
// Pure: no goroutine, no clock.
func issueOrder(dirs []dir, sizes []int, reorder bool, order []int) []int {
	if !reorder {
		for i := range dirs {
			order = append(order, i)
		}
		return order
	}
	nextPut, nextGet := 0, 0
	var putBytes, getBytes int
	advance := func(i int, d dir) int {
		for i < len(dirs) && dirs[i] != d {
			i++
		}
		return i
	}
	nextPut, nextGet = advance(0, dirPut), advance(0, dirGet)
	for nextPut < len(dirs) || nextGet < len(dirs) {
		if nextGet >= len(dirs) || (nextPut < len(dirs) && putBytes <= getBytes) {
			order = append(order, nextPut)
			putBytes += sizes[nextPut]
			nextPut = advance(nextPut+1, dirPut)
		} else {
			order = append(order, nextGet)
			getBytes += sizes[nextGet]
			nextGet = advance(nextGet+1, dirGet)
		}
	}
	return order
}
