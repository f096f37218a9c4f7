#pragma once
// "Did you mean": the closest of a set of names to a misspelt one (presets, parameter keys,
// choices), for the one-line messages of bad input.
#include <cstddef>
#include <string>
#include <vector>

namespace tokdyn {

/// Optimal-string-alignment distance (insertions, deletions, substitutions and transpositions of
/// adjacent characters, each 1), case-insensitive.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate closest to `word` when it is close enough to be a slip: none for words of 1 or 2
/// characters, at most 1 edit up to 4, 2 up to 8, 3 beyond; or the only candidate `word` is a prefix of (of 3 or
/// more characters). Ties go to the first candidate. Empty when none qualifies.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

/// "; did you mean 'NAME'?" for closest_name, or "" (to append to an error message).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tokdyn
