// Package recipetest holds the structural tests of the install recipes.
package recipetest
