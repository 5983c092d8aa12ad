// Package admit holds the queue the manager admits pod operations' plugin
// work through: at most a bound of holders at a time, the others served
// in arrival order. A waiter whose context ends leaves the queue holding
// nothing and gets the context's error; a slot it was granted in the same
// moment goes to the next waiter, so no slot is ever lost.
//
// The queue knows nothing of what it admits. Which work takes a slot,
// and why some never does, is written in pkg/ocicni's package doc
// (Admission).
package admit
