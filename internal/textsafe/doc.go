// Package textsafe makes strings that gpuattest did not write safe to
// print on a terminal. A bundle's media type, a statement's field names,
// a predicate's values, a results file's case names and a pipeline's
// step names can all hold escape sequences that move the cursor, erase
// lines or recolour them: printed raw, they can erase a FAIL line and
// draw a PASS. Every string from a bundle, statement, predicate, results
// file or pipeline goes through Line (one table cell or line) or Lines (a
// message of several lines) before text output.
//
// Control characters (C0, DEL, C1), Unicode format characters (the bidi
// overrides and isolates, zero-width characters), line and paragraph
// separators and bytes that are not UTF-8 are shown as Go escapes:
// \x1b, \n, \u202e, \xff. Everything else, backslashes included, is kept
// as it is. JSON output needs none of this: the encoder escapes.
package textsafe
