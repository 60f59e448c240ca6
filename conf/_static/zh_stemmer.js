// Sphinx 9's Chinese search data ends with `window.Stemmer = ChineseStemmer;` but defines only an
// EnglishStemmer (Chinese words are not stemmed; Latin words in Chinese pages are, as in English).
// Defined before language_data.js runs, this name makes that line work: a ChineseStemmer is an
// EnglishStemmer.
window.ChineseStemmer = function ChineseStemmer() {
  return new EnglishStemmer();  // defined by language_data.js before any search runs
};
