"""The ``totalsegmentator`` localizer: TotalSegmentator run on the item's CT."""
