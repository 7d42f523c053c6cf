package main

import "context"

func secretCases(ctx context.Context, l *lab) ([]result, error) { return nil, nil }
func crashCases(ctx context.Context, l *lab) ([]result, error)  { return nil, nil }
func resumeCases(ctx context.Context, l *lab) ([]result, error) { return nil, nil }
func keyCases(ctx context.Context, l *lab) ([]result, error)    { return nil, nil }
