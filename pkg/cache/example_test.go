package cache_test

import (
	"fmt"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

func ExampleFileName() {
	name, err := cache.FileName("my-net", "0123abcd", "eth0")
	fmt.Println(name, err)

	_, err = cache.FileName("my-net", "../../etc", "eth0")
	fmt.Println(err)
	// Output:
	// my-net-0123abcd-eth0 <nil>
	// cache: invalid container ID "../../etc": contains ".."
}

func ExampleSplitFileName() {
	// Network and interface names may contain '-': only the container ID
	// tells where one ends and the other starts.
	network, ifname, ok := cache.SplitFileName("my-net-0123abcd-net-1", "0123abcd")
	fmt.Println(network, ifname, ok)
	// Output: my-net net-1 true
}
