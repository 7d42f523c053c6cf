package main

import "context"

func keyCases(ctx context.Context, l *lab) ([]result, error)    { return nil, nil }
