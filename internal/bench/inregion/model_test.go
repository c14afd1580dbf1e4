package inregion

import (
	"math"
	"slices"
	"testing"
	"time"
)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// At passes through every published point and interpolates linearly
// between them; out-of-range quantiles are clamped.
func TestQuantilesAt(t *testing.T) {
	q := TransactWrite5
	for _, c := range []struct {
		u    float64
		want time.Duration
	}{
		{-1, ms(19.4)}, {0, ms(19.4)}, {0.25, ms((19.4 + 25.3) / 2)}, {0.5, ms(25.3)}, {0.9, ms(30.7)},
		{0.95, ms(36.4)}, {0.99, ms(92.5)}, {0.995, ms((92.5 + 218) / 2)}, {1, ms(218)}, {2, ms(218)},
	} {
		if got := q.At(c.u); (got - c.want).Abs() > time.Microsecond {
			t.Errorf("At(%g) = %v, want %v", c.u, got, c.want)
		}
	}
	for _, q := range Published {
		prev := time.Duration(0)
		for u := 0.0; u <= 1; u += 0.001 {
			if d := q.At(u); d < prev {
				t.Fatalf("%s: At(%g) = %v < %v: not monotonic", q.Name, u, d, prev)
			} else {
				prev = d
			}
		}
	}
}

// Draws from the model reproduce the published quantiles, and the same
// seed gives the same draws.
func TestModelReproducesQuantiles(t *testing.T) {
	a, b := NewModel(7), NewModel(7)
	const n = 200_000
	put := make([]time.Duration, n)
	for i := range put {
		u := a.draw()
		if v := b.draw(); v != u {
			t.Fatalf("draw %d: %g and %g from the same seed", i, u, v)
		}
		put[i] = PutItem.At(u)
	}
	slices.Sort(put)
	for _, c := range []struct {
		p    float64
		want float64
	}{{0.5, 7.55}, {0.9, 11.3}, {0.99, 16.2}} {
		got := float64(put[int(c.p*n)]) / float64(time.Millisecond)
		if math.Abs(got-c.want)/c.want > 0.02 {
			t.Errorf("PutItem p%g of %d draws = %.2f ms, want %.2f ± 2 %%", c.p*100, n, got, c.want)
		}
	}
	if NewModel(8).draw() == NewModel(7).draw() {
		t.Errorf("seeds 7 and 8 draw the same first quantile")
	}
}

// Reads and single-item writes take the put's figures, transactions the
// 5-item ones (cancelled: the failed-condition ones); anything else is not
// delayed.
func TestRule(t *testing.T) {
	for op, want := range map[string][2]string{
		"GetItem": {PutItem.Name, PutItem.Name}, "Query": {PutItem.Name, PutItem.Name},
		"UpdateItem":         {PutItem.Name, PutItem.Name},
		"TransactWriteItems": {TransactWrite5.Name, TransactWrite5Failed.Name},
	} {
		r, ok := rule(op)
		if !ok || r.Done.Name != want[0] || r.Cancelled.Name != want[1] {
			t.Errorf("%s: %q, %q, %v; want %q, %q", op, r.Done.Name, r.Cancelled.Name, ok, want[0], want[1])
		}
	}
	for _, op := range []string{"CreateTable", "DescribeTable", "Scan", "BatchWriteItem", "unknown"} {
		if _, ok := rule(op); ok {
			t.Errorf("%s is delayed; want no delay", op)
		}
	}
	if len(Rules()) != 7 {
		t.Errorf("rules: %+v", Rules())
	}
}

// A sequence of three puts has the published put median three times over
// at its median, and a p99 below three put p99s: the tails of independent
// draws rarely coincide.
func TestSequence(t *testing.T) {
	seq := NewModel(3).Sequence(100_000, PutItem, PutItem, PutItem)
	p50, p99 := seq[len(seq)/2], seq[len(seq)*99/100]
	if p50 < ms(3*7.55*0.95) || p50 > ms(3*7.55*1.15) {
		t.Errorf("three puts: p50 %v, want about 3 × 7.55 ms", p50)
	}
	if p99 >= ms(3*16.2) || p99 <= ms(16.2+2*7.55) {
		t.Errorf("three puts: p99 %v, want between one p99 plus two medians and three p99s", p99)
	}
	if !slices.IsSorted(seq) {
		t.Errorf("not sorted")
	}
}

// Every stream starts from the seed and continues where it stopped, so the
// i-th draw of each stream is the same.
func TestModelStreams(t *testing.T) {
	m := NewModel(5)
	m.Stream("a")
	a1, a2 := m.draw(), m.draw()
	m.Stream("b")
	b1 := m.draw()
	m.Stream("a")
	a3 := m.draw()
	m.Stream("b")
	b2, b3 := m.draw(), m.draw()
	if a1 != b1 || a2 != b2 || a3 != b3 {
		t.Errorf("streams a %v %v %v and b %v %v %v differ", a1, a2, a3, b1, b2, b3)
	}
	if a1 == a2 || a2 == a3 {
		t.Errorf("a stream repeats its draws: %v %v %v", a1, a2, a3)
	}
}

// A stream's transactions draw from a sequence of their own: the i-th
// transaction of a case that sends a read beside each one meets the same
// quantile as the i-th of a case that sends transactions alone, and not
// the read's.
func TestModelTransactionsDrawApart(t *testing.T) {
	m := NewModel(5)
	m.Stream("transactions alone")
	alone := []float64{m.drawFor(true), m.drawFor(true), m.drawFor(true)}
	m.Stream("with reads")
	var beside, reads []float64
	for i := range 3 {
		if i%2 == 0 { // the read arrives first, then second
			reads = append(reads, m.drawFor(false))
			beside = append(beside, m.drawFor(true))
		} else {
			beside = append(beside, m.drawFor(true))
			reads = append(reads, m.drawFor(false))
		}
	}
	if !slices.Equal(alone, beside) {
		t.Errorf("transactions alone %v, beside reads %v: want the same draws", alone, beside)
	}
	if slices.Equal(alone, reads) {
		t.Errorf("reads draw the transactions' quantiles %v", reads)
	}
	m.Stream("reads alone")
	if got := []float64{m.draw(), m.draw(), m.draw()}; !slices.Equal(got, reads) {
		t.Errorf("reads alone %v, beside transactions %v: want the same draws", got, reads)
	}
}
