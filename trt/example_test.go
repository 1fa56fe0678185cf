package trt_test

import (
	"errors"
	"fmt"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/trt"
)

// The plan the runtime loads is the one built with the running TensorRT on
// the running GPU; the others are refused with the reason.
func ExampleSelectPlan() {
	plans := []engines.PlanInfo{
		{Graph: "energy_grad", File: trt.PlanFile("energy_grad", "10.3.0", "Orin", "fp16"), TRTVersion: "10.3.0", GPU: "Orin", Precision: "fp16"},
		{Graph: "energy_grad", File: trt.PlanFile("energy_grad", "10.2.0", "Orin", "fp16"), TRTVersion: "10.2.0", GPU: "Orin", Precision: "fp16"},
	}
	p, err := trt.SelectPlan(plans, "energy_grad", "10.3.0", "Orin", "")
	fmt.Println(p.File, err)
	_, err = trt.SelectPlan(plans[1:], "energy_grad", "10.3.0", "Orin", "")
	fmt.Println(errors.Is(err, trt.ErrPlanMismatch))
	// Output:
	// plans/10.3.0_Orin_fp16.plan <nil>
	// true
}
