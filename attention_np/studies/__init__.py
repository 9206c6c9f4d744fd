"""The studies behind the lessons: footnote 4 measured, additive attention, and the scoring
functions compared on a task. Each returns numbers; :mod:`attention_np.viz` draws them.
"""
