package govalidator

// A package of validators and sanitizers for strings, structures and collections.
