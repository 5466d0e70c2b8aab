package policy_test

import (
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/plan/policy"
)

func ExampleParse() {
	conf := `CkptLead=10m
NCCLForce=NCCL_IB_TIMEOUT=22
PartitionName=preempt CkptLead=3m UserOverride=none
`
	p, err := policy.Parse(strings.NewReader(conf), "trainrun.conf")
	if err != nil {
		fmt.Println(err)
		return
	}
	s := p.Effective("preempt")
	fmt.Println(policy.FormatDuration(s.CkptLead.Value), "from", s.CkptLead.Source)
	fmt.Println(s.CkptSignal.Value, "from", s.CkptSignal.Source)
	fmt.Println(s.NCCLForce.Value[0].Name, "from", s.NCCLForce.Value[0].Source)
	fmt.Println(p.MayOverride("CkptLead", "preempt"), p.MayOverride("CkptLead", "gpu"))

	_, err = policy.Parse(strings.NewReader("CkptLead=10 min\nMaxRequeue=-1\n"), "trainrun.conf")
	fmt.Println(err)
	// Output:
	// 3m from partition preempt (trainrun.conf:3)
	// USR2 from default
	// NCCL_IB_TIMEOUT from site (trainrun.conf:2)
	// false true
	// trainrun.conf:1: CkptLead: "min" after CkptLead=10 is not Key=Value (a value with spaces needs quotes)
	// trainrun.conf:2: MaxRequeue: bad value "-1": less than 0; accepted: a whole number; 0 = never requeue
}
