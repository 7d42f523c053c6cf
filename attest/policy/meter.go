package policy

import (
	"fmt"
	"math"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// The meter bounds what one evaluation may cost, in the units of cel-go's
// runtime cost model (one per identifier, field selection, operator and
// call; strings, lists and regular expressions by their size), and
// checks the context while it counts.
//
// cel-go's own tracker (cel.CostLimit) keeps a stack of the values it
// has seen and searches it on every step; inside a comprehension the
// stack grows by a few values each iteration and the searches make a
// rule's evaluation quadratic in the length of the list it ranges over
// (a 2 MB predicate took seconds, 21 MB minutes). The meter decorates
// each planned node instead: a node's cost is charged when it returns,
// from its own result and its arguments' results, which it finds on a
// stack that it cuts back to where it found it. Evaluation stays linear.

// checkEvery is how many charges pass between two checks of the context.
const checkEvery = 1 << 10

// budget is one evaluation's account.
type budget struct {
	cost, limit uint64
	done        <-chan struct{}
	ticks       uint
	// stack holds the results of the nodes evaluated since the enclosing
	// node began: a call finds its arguments' values there.
	stack []ref.Val
}

// charge adds c and stops the evaluation (cel-go turns the panic into an
// error) when the limit is passed or the context is done.
func (b *budget) charge(c uint64) {
	b.cost += c
	if b.cost > b.limit {
		panic(interpreter.EvalCancelledError{Cause: interpreter.CostLimitExceeded,
			Message: fmt.Sprintf("operation cancelled: cost limit %d exceeded", b.limit)})
	}
	b.ticks++
	if b.ticks%checkEvery == 0 && b.done != nil {
		select {
		case <-b.done:
			panic(interpreter.EvalCancelledError{Cause: interpreter.ContextCancelled, Message: "operation cancelled: interrupted"})
		default:
		}
	}
}

// leave cuts the stack back to mark, pushes v and charges c.
func (b *budget) leave(mark int, v ref.Val, c uint64) {
	b.stack = append(b.stack[:mark], v)
	b.charge(c)
}

// meterActivation carries a budget through an evaluation; it declares no
// variable of its own.
type meterActivation struct {
	vars   interpreter.Activation
	budget *budget
}

// ResolveName resolves the rule's variables.
func (a *meterActivation) ResolveName(name string) (any, bool) { return a.vars.ResolveName(name) }

// Parent returns nil: the meter's activation is the root.
func (a *meterActivation) Parent() interpreter.Activation { return nil }

// budgetOf finds the budget of the evaluation vars belongs to, nil when
// the evaluation is not metered (constant folding at plan time).
func budgetOf(vars interpreter.Activation) *budget {
	for a := vars; a != nil; a = a.Parent() {
		if m, ok := a.(*meterActivation); ok {
			return m.budget
		}
	}
	return nil
}

// meter is the interpreter decorator that wraps every planned node. The
// wrappers keep the interfaces the planner looks for (constants,
// attributes, calls, constructors), so planning is unchanged. Constant
// regular expressions are compiled here, once.
func meter(i interpreter.Interpretable) (interpreter.Interpretable, error) {
	switch n := i.(type) {
	case *meteredConst, *meteredAttr, *meteredCall, *meteredConstructor, *meteredNode:
		return i, nil
	case interpreter.InterpretableConst:
		return &meteredConst{n}, nil
	case interpreter.InterpretableAttribute:
		return &meteredAttr{InterpretableAttribute: n}, nil
	case interpreter.InterpretableCall:
		call, err := compileRegex(n)
		if err != nil {
			return nil, err
		}
		return &meteredCall{call}, nil
	case interpreter.InterpretableConstructor:
		return &meteredConstructor{n}, nil
	}
	return &meteredNode{i}, nil
}

// compileRegex compiles the pattern of a matches call once, when it is a
// constant.
func compileRegex(call interpreter.InterpretableCall) (interpreter.InterpretableCall, error) {
	opt := interpreter.MatchesRegexOptimization
	args := call.Args()
	if call.Function() != opt.Function || len(args) <= opt.RegexIndex {
		return call, nil
	}
	c, ok := args[opt.RegexIndex].(interpreter.InterpretableConst)
	if !ok {
		return call, nil
	}
	pattern, ok := c.Value().(types.String)
	if !ok {
		return call, nil
	}
	return opt.Factory(call, string(pattern))
}

// meteredConst pushes a constant's value; constants cost nothing.
type meteredConst struct{ interpreter.InterpretableConst }

// Eval returns the constant.
func (m *meteredConst) Eval(vars interpreter.Activation) ref.Val {
	v := m.InterpretableConst.Eval(vars)
	if b := budgetOf(vars); b != nil {
		b.stack = append(b.stack, v)
	}
	return v
}

// meteredAttr charges an identifier and each field selection or index
// applied to it.
type meteredAttr struct {
	interpreter.InterpretableAttribute
	// quals counts the qualifiers the planner added after wrapping.
	quals uint64
}

// AddQualifier counts the qualifier and adds it to the attribute.
func (m *meteredAttr) AddQualifier(q interpreter.Qualifier) (interpreter.Attribute, error) {
	m.quals++
	_, err := m.InterpretableAttribute.AddQualifier(q)
	return m, err
}

// Eval resolves the attribute.
func (m *meteredAttr) Eval(vars interpreter.Activation) ref.Val {
	return metered(vars, m.InterpretableAttribute, func([]ref.Val, ref.Val) uint64 {
		return common.SelectAndIdentCost * (1 + m.quals)
	})
}

// meteredCall charges a function call as cel-go's cost model does.
type meteredCall struct{ interpreter.InterpretableCall }

// Eval calls the function.
func (m *meteredCall) Eval(vars interpreter.Activation) ref.Val {
	return metered(vars, m.InterpretableCall, func(args []ref.Val, v ref.Val) uint64 {
		return callCost(overloadOf(m.Function(), m.OverloadID(), args), args)
	})
}

// meteredConstructor charges a list, map or message literal.
type meteredConstructor struct {
	interpreter.InterpretableConstructor
}

// Eval builds the value.
func (m *meteredConstructor) Eval(vars interpreter.Activation) ref.Val {
	return metered(vars, m.InterpretableConstructor, func([]ref.Val, ref.Val) uint64 {
		switch m.Type() {
		case types.ListType:
			return common.ListCreateBaseCost
		case types.MapType:
			return common.MapCreateBaseCost
		}
		return common.StructCreateBaseCost
	})
}

// meteredNode charges one unit for any other step: logical operators,
// conditionals, comprehensions (whose iterations charge their own
// steps).
type meteredNode struct{ interpreter.Interpretable }

// Eval evaluates the node.
func (m *meteredNode) Eval(vars interpreter.Activation) ref.Val {
	return metered(vars, m.Interpretable, func([]ref.Val, ref.Val) uint64 { return 1 })
}

// metered evaluates n and charges cost(the values its children left on
// the stack, its result).
func metered(vars interpreter.Activation, n interpreter.Interpretable, cost func([]ref.Val, ref.Val) uint64) ref.Val {
	b := budgetOf(vars)
	if b == nil {
		return n.Eval(vars)
	}
	mark := len(b.stack)
	v := n.Eval(vars)
	if mark > len(b.stack) {
		// A cancelled evaluation unwinds past this node; nothing to do.
		mark = len(b.stack)
	}
	b.leave(mark, v, cost(b.stack[mark:], v))
	return v
}

// sizedOperators are the operators whose cost depends on the size of
// their string or bytes operands: the string and the bytes overload.
var sizedOperators = map[string][2]string{
	operators.Add:           {overloads.AddString, overloads.AddBytes},
	operators.Less:          {overloads.LessString, overloads.LessBytes},
	operators.LessEquals:    {overloads.LessEqualsString, overloads.LessEqualsBytes},
	operators.Greater:       {overloads.GreaterString, overloads.GreaterBytes},
	operators.GreaterEquals: {overloads.GreaterEqualsString, overloads.GreaterEqualsBytes},
}

// overloadOf names the overload a call ran. Over dyn values (the
// predicate is one) the checker leaves operators unresolved; the
// arguments' runtime types then say which one ran.
func overloadOf(function, overload string, args []ref.Val) string {
	if overload != "" || len(args) != 2 {
		return overload
	}
	_, str := args[0].(types.String)
	_, byt := args[0].(types.Bytes)
	if function == operators.In {
		if _, ok := args[1].(traits.Lister); ok {
			return overloads.InList
		}
		return overload
	}
	if args[0].Type() != args[1].Type() || !str && !byt {
		return overload
	}
	ids, ok := sizedOperators[function]
	switch {
	case !ok:
		return overload
	case str:
		return ids[0]
	}
	return ids[1]
}

// callCost is cel-go's runtime cost of a call (interpreter.CostTracker):
// linear in the size of strings and lists for traversals, comparisons
// and concatenations, the product of string and pattern length for
// matches and contains, and one otherwise.
func callCost(overload string, args []ref.Val) uint64 {
	arg := func(i int) uint64 {
		if i < len(args) {
			return size(args[i])
		}
		return 1
	}
	traverse := func(n uint64) uint64 { return uint64(math.Ceil(float64(n) * common.StringTraversalCostFactor)) }
	switch overload {
	case overloads.StartsWithString, overloads.EndsWithString, overloads.StringToBytes, overloads.BytesToString,
		overloads.ExtQuoteString, overloads.ExtFormatString:
		return traverse(arg(0))
	case overloads.InList:
		// Each element is compared with the value: at most the whole
		// list is traversed.
		return deep(args, 1, math.MaxUint64)
	case overloads.Equals, overloads.NotEquals:
		// Equality of lists and maps compares their elements in depth.
		a := deep(args, 0, math.MaxUint64)
		return traverse(min(a, deep(args, 1, a)))
	case overloads.LessString, overloads.GreaterString, overloads.LessEqualsString, overloads.GreaterEqualsString,
		overloads.LessBytes, overloads.GreaterBytes, overloads.LessEqualsBytes, overloads.GreaterEqualsBytes:
		return traverse(min(arg(0), arg(1)))
	case overloads.AddString, overloads.AddBytes:
		return traverse(arg(0) + arg(1))
	case overloads.MatchesString:
		str := uint64(math.Ceil((1 + float64(arg(0))) * common.StringTraversalCostFactor))
		return str * uint64(math.Ceil(float64(arg(1))*common.RegexStringLengthCostFactor))
	case overloads.ContainsString:
		return traverse(arg(0)) * traverse(arg(1))
	}
	return 1
}

// deep returns deepSize(args[i], limit), 1 when the argument is missing.
func deep(args []ref.Val, i int, limit uint64) uint64 {
	if i >= len(args) {
		return 1
	}
	return deepSize(args[i].Value(), limit)
}

// deepSize counts the elements, map entries, string bytes and scalars
// of a value in depth, stopping once the count passes limit. cel-go's
// model charges a comparison by the values' top-level size; a predicate's
// nested maps would let a rule compare megabytes for a few units.
func deepSize(v any, limit uint64) uint64 {
	switch x := v.(type) {
	case string:
		return max(uint64(len(x)), 1)
	case []byte:
		return max(uint64(len(x)), 1)
	case []any:
		n := uint64(1)
		for _, e := range x {
			if n > limit {
				break
			}
			n += deepSize(e, limit-n)
		}
		return n
	case map[string]any:
		n := uint64(1)
		for k, e := range x {
			if n > limit {
				break
			}
			n += uint64(len(k)) + deepSize(e, limit-n)
		}
		return n
	case []ref.Val:
		n := uint64(1)
		for _, e := range x {
			if n > limit {
				break
			}
			n += deepSize(e.Value(), limit-n)
		}
		return n
	case ref.Val:
		return deepSize(x.Value(), limit)
	}
	return 1
}

// size is the size cel-go's cost model gives a value: its length for
// strings, bytes, lists and maps, 1 for anything else.
func size(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
		return 0
	}
	if o, ok := v.(*types.Optional); ok && o.HasValue() {
		return size(o.GetValue())
	}
	return 1
}
