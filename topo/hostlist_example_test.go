package topo_test

import (
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/topo"
)

func ExampleExpandHostlist() {
	hosts, err := topo.ExpandHostlist("gpu[098-101],rack[1-2]-node[01-02]")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(hosts, " "))

	_, err = topo.ExpandHostlist("n[5-3]")
	fmt.Println(err)
	// Output:
	// gpu098 gpu099 gpu100 gpu101 rack1-node01 rack1-node02 rack2-node01 rack2-node02
	// hostlist "n[5-3]", column 3: bad range "5-3": start 5 is greater than end 3
}

func ExampleCompressHostlist() {
	fmt.Println(topo.CompressHostlist([]string{"n1", "n2", "n3", "n5", "n09", "n10"}))
	// Output: n[1-3,5,09-10]
}

func ExampleParseTopologyConf() {
	conf := `SwitchName=leaf0 Nodes=gpu[01-04]
SwitchName=leaf1 Nodes=gpu[05-08]
SwitchName=spine Switches=leaf[0-1]
`
	c, err := topo.ParseTopologyConf(strings.NewReader(conf), "topology.conf")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Leaf("gpu03"), c.Distance("gpu01", "gpu04"), c.Distance("gpu01", "gpu05"), c.Levels())

	_, err = topo.ParseTopologyConf(strings.NewReader("SwitchName=s0 Nodes=n1\nSwitchName=s1 Switchs=s0\n"), "topology.conf")
	fmt.Println(err)
	// Output:
	// leaf0 1 2 2
	// topology.conf:2: Switchs: unknown key "Switchs"; accepted: SwitchName, Switches, Nodes, LinkSpeed, BlockName, BlockSizes, RingName (did you mean Switches?)
}
