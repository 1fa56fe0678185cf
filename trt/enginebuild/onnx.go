package enginebuild

import (
	"errors"
	"fmt"
)

// Graph is the part of an ONNX model the engine builder needs: its nodes
// (name, op type, inputs, outputs) and graph output names. It is read with
// a minimal protobuf decoder, so the package needs no ONNX dependency.
type Graph struct {
	Nodes   []Node
	Inputs  []string
	Outputs []string
}

// Node is one ONNX NodeProto. TensorRT's ONNX parser names the layer it
// creates for a node after the node, which is what --layerPrecisions
// matches.
type Node struct {
	Name    string
	OpType  string
	Inputs  []string
	Outputs []string
}

// ONNX protobuf field numbers (onnx.proto3).
const (
	modelGraph       = 7  // ModelProto.graph
	graphNode        = 1  // GraphProto.node
	graphInput       = 11 // GraphProto.input
	graphOutput      = 12 // GraphProto.output
	nodeInput        = 1  // NodeProto.input
	nodeOutput       = 2  // NodeProto.output
	nodeName         = 3  // NodeProto.name
	nodeOpType       = 4  // NodeProto.op_type
	valueInfoName    = 1  // ValueInfoProto.name
	wireVarint       = 0
	wireFixed64      = 1
	wireLengthDelim  = 2
	wireFixed32      = 5
	maxVarintLen64   = 10
	maxFieldNumber   = 1<<29 - 1
	errPrefixOnnxFmt = "enginebuild: onnx: "
)

var errTruncated = errors.New(errPrefixOnnxFmt + "truncated protobuf")

// ParseONNX decodes the graph of a serialized ONNX ModelProto.
func ParseONNX(model []byte) (*Graph, error) {
	g := &Graph{}
	found := false
	err := fields(model, func(num int, wire int, b []byte) error {
		if num == modelGraph && wire == wireLengthDelim {
			found = true
			return parseGraph(b, g)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New(errPrefixOnnxFmt + "no graph in the model (is this an ONNX file?)")
	}
	return g, nil
}

func parseGraph(b []byte, g *Graph) error {
	return fields(b, func(num, wire int, v []byte) error {
		if wire != wireLengthDelim {
			return nil
		}
		switch num {
		case graphNode:
			var n Node
			err := fields(v, func(num, wire int, s []byte) error {
				if wire != wireLengthDelim {
					return nil
				}
				switch num {
				case nodeInput:
					n.Inputs = append(n.Inputs, string(s))
				case nodeOutput:
					n.Outputs = append(n.Outputs, string(s))
				case nodeName:
					n.Name = string(s)
				case nodeOpType:
					n.OpType = string(s)
				}
				return nil
			})
			if err != nil {
				return err
			}
			g.Nodes = append(g.Nodes, n)
		case graphInput, graphOutput:
			name := ""
			err := fields(v, func(num, wire int, s []byte) error {
				if num == valueInfoName && wire == wireLengthDelim {
					name = string(s)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if num == graphInput {
				g.Inputs = append(g.Inputs, name)
			} else {
				g.Outputs = append(g.Outputs, name)
			}
		}
		return nil
	})
}

// fields calls f for each top-level field of a protobuf message; v is the
// payload of length-delimited fields and nil otherwise.
func fields(b []byte, f func(num, wire int, v []byte) error) error {
	for len(b) > 0 {
		key, n := varint(b)
		if n <= 0 {
			return errTruncated
		}
		b = b[n:]
		num, wire := int(key>>3), int(key&7)
		if num <= 0 || num > maxFieldNumber {
			return fmt.Errorf(errPrefixOnnxFmt+"bad field number %d", num)
		}
		var v []byte
		switch wire {
		case wireVarint:
			_, n := varint(b)
			if n <= 0 {
				return errTruncated
			}
			b = b[n:]
		case wireFixed64:
			if len(b) < 8 {
				return errTruncated
			}
			b = b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return errTruncated
			}
			b = b[4:]
		case wireLengthDelim:
			l, n := varint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errTruncated
			}
			v = b[n : n+int(l)]
			b = b[n+int(l):]
		default:
			return fmt.Errorf(errPrefixOnnxFmt+"unsupported wire type %d", wire)
		}
		if err := f(num, wire, v); err != nil {
			return err
		}
	}
	return nil
}

// varint decodes a protobuf varint; n ≤ 0 means malformed or truncated.
func varint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < maxVarintLen64; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
